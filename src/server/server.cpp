#include "server/server.h"

#include <thread>

#include "server/openai_response.h"

namespace llmserve::server {

namespace {

// The default KV pool holds every sequence the engine runs at once.
model::InstanceConfig instance_config(const ModelConfig& m) {
  model::InstanceConfig c = m.instance;
  c.max_seqs = m.engine.max_seqs;
  return c;
}

engine::EngineConfig engine_config(const ModelConfig& m, const engine::Speculation& spec) {
  engine::EngineConfig c = m.engine;
  if (spec.enabled()) c.spec = {spec.config()};
  return c;
}

}  // namespace

Server::Server(const ModelConfig& m, ApiConfig api_config, HttpConfig http_config)
    : pool_(std::make_unique<ThreadPool>(m.threads > 0 ? m.threads : default_thread_count())),
      model_(model::LoadedModel::load(m.path, *pool_, instance_config(m))),
      spec_(std::make_unique<engine::Speculation>(m.spec, *model_, *pool_, instance_config(m))),
      engine_(std::make_unique<engine::Engine>(std::vector<model::Instance*>{model_.get()}, engine_config(m, *spec_))),
      api_(std::make_unique<ApiHandler>(*engine_, *model_, std::move(api_config))) {
  ApiHandler* g = api_.get();
  http_ = std::make_unique<HttpServer>(
      std::move(http_config), [g](HttpRequest req, std::shared_ptr<Exchange> ex) { g->handle(std::move(req), std::move(ex)); },
      [g](int status, const std::string& message) { return g->error_page(status, message); });
  HttpServer* h = http_.get();
  api_->set_connection_count([h] { return h->open_connections(); });
}

Server::~Server() {
  http_->stop();
  engine_.reset();
}

void Server::start() { http_->start(); }

bool Server::drain(std::chrono::milliseconds grace) {
  api_->start_draining();
  http_->stop_accepting();
  auto settles_within = [this](std::chrono::milliseconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (api_->in_flight() > 0 || http_->active_exchanges() > 0) {
      if (std::chrono::steady_clock::now() >= deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return true;
  };
  if (settles_within(grace)) return true;
  http_->end_exchanges();
  settles_within(std::chrono::seconds(2));  // for the endings to be written
  return false;
}

}  // namespace llmserve::server
