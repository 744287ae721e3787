#include "server/server.h"

#include <thread>

#include "core/error.h"
#include "server/openai_response.h"

namespace llmserve::server {

namespace {

// The default KV pool holds every sequence the engine runs at once; the
// models' pools (and their drafts') share the memory available.
model::InstanceConfig instance_config(const ModelConfig& m) {
  model::InstanceConfig c = m.instance;
  c.max_seqs = m.engine.max_seqs;
  const bool drafts = m.spec.method == "draft" || m.spec.method == "self";
  c.kv_share = static_cast<int>(m.models.size()) * (drafts ? 2 : 1);
  return c;
}

}  // namespace

Server::Server(const ModelConfig& m, ApiConfig api_config, HttpConfig http_config)
    : pool_(std::make_unique<ThreadPool>(m.threads > 0 ? m.threads : default_thread_count())) {
  if (m.models.empty()) throw Error("no model to serve");
  engine::EngineConfig engine_config = m.engine;
  engine_config.spec.clear();  // from m.spec, by model below
  std::vector<model::Instance*> instances;
  std::vector<NamedModel> named;
  for (const ModelFile& f : m.models) {
    models_.push_back(model::LoadedModel::load(f.path, *pool_, instance_config(m)));
    specs_.push_back(std::make_unique<engine::Speculation>(m.spec, *models_.back(), *pool_, instance_config(m)));
    engine_config.spec.push_back(specs_.back()->config());  // no proposer: off
    instances.push_back(models_.back().get());
    named.push_back({f.name, models_.back().get()});
  }
  engine_ = std::make_unique<engine::Engine>(std::move(instances), std::move(engine_config));
  api_ = std::make_unique<ApiHandler>(*engine_, named, std::move(api_config));
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
