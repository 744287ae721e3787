#pragma once
// The whole server: engine, API handler and HTTP listener, with an orderly
// shutdown (`llmserve serve` and the integration tests use it).
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "engine/engine.h"
#include "engine/speculation.h"
#include "model/instance.h"
#include "server/api_handler.h"
#include "server/http_server.h"

namespace llmserve::server {

// A model file and its id in the API.
struct ModelFile {
  std::string name;
  std::string path;
};

// The models `serve` loads and how the engine runs them: one compute pool
// for all; each model gets its own instance, KV pool and running slots as
// `instance` and `engine` say, and its own proposer as `spec` says.
struct ModelConfig {
  std::vector<ModelFile> models;  // at least one
  int threads = 0;  // 0: default_thread_count()
  model::InstanceConfig instance;
  engine::EngineConfig engine;
  engine::SpeculationOptions spec;  // --spec; a draft model gets an instance like the target's
};

class Server {
 public:
  // Loads the models and binds the port. Throws Error.
  Server(const ModelConfig& model_config, ApiConfig api_config, HttpConfig http_config);
  ~Server();

  void start();
  uint16_t port() const { return http_->port(); }
  std::string url() const { return http_->url(); }
  ApiHandler& api() { return *api_; }
  engine::Engine& engine() { return *engine_; }
  int num_models() const { return static_cast<int>(models_.size()); }
  const model::LoadedModel& model(int index = 0) const { return *models_[static_cast<size_t>(index)]; }

  // SIGTERM: stop accepting, answer 503 to new requests, let in-flight ones
  // finish (up to `grace`), then stop. True when nothing was cut short;
  // otherwise the open responses were ended with an error (streams: an
  // error event and [DONE]) and given a moment to be written.
  bool drain(std::chrono::milliseconds grace);

 private:
  // Destruction order matters: the HTTP threads stop first, then the engine
  // (whose last callbacks may still post to the HTTP strands' io_context),
  // then the proposers and the models they ran and the threads they ran on.
  std::unique_ptr<ThreadPool> pool_;
  std::vector<std::unique_ptr<model::LoadedModel>> models_;
  std::vector<std::unique_ptr<engine::Speculation>> specs_;  // by model
  std::unique_ptr<engine::Engine> engine_;
  std::unique_ptr<ApiHandler> api_;
  std::unique_ptr<HttpServer> http_;
};

}  // namespace llmserve::server
