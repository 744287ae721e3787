// llmserve serve: the OpenAI-compatible HTTP server.
#include <sys/resource.h>

#include <csignal>
#include <cstdlib>
#include <thread>

#include <spdlog/spdlog.h>

#include "cli/cache_flags.h"
#include "cli/commands.h"
#include "cli/model_flags.h"
#include "cli/spec_flags.h"
#include "cli/flag_checks.h"
#include "cli/key_flags.h"
#include "core/error.h"
#include "server/server.h"

namespace llmserve::cli {

namespace {

struct ServeOptions {
  std::vector<std::string> models;  // --model FILE or NAME=FILE, repeatable
  std::string model_name;
  server::ModelConfig engine;  // the models and how the engine runs them
  server::ApiConfig api;
  server::HttpConfig http;
  KeyFlags keys;
  double kv_mem_mib = 0;
  std::string kv_type = "f16";
  double request_timeout_s = 600;
  double header_timeout_s = 10, body_timeout_s = 30;
  double drain_timeout_s = 60;
  std::string log_level = "info";
  CacheFlags cache;
};

// One descriptor per connection: lift the soft limit to the hard one.
void raise_fd_limit(int wanted) {
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return;
  const rlim_t need = static_cast<rlim_t>(wanted) * 2 + 64;
  if (rl.rlim_cur >= need) return;
  rl.rlim_cur = std::min(rl.rlim_max, need);
  setrlimit(RLIMIT_NOFILE, &rl);
}

const char* signal_name(int sig) { return sig == SIGTERM ? "SIGTERM" : "SIGINT"; }

std::chrono::milliseconds seconds(double s) { return std::chrono::milliseconds(static_cast<int64_t>(s * 1000)); }

void run_serve(ServeOptions o) {
  spdlog::set_pattern("[%Y-%m-%d %H:%M:%S.%e] [%l] %v");
  const auto level = spdlog::level::from_str(o.log_level);
  if (level == spdlog::level::off && o.log_level != "off") throw Error("--log-level: unknown level '" + o.log_level + "'");

  Keys keys = keys_from(o.keys);
  o.api.keys = std::move(keys.api);
  o.api.admin_keys = std::move(keys.admin);
  if (o.api.metrics_auth && o.api.keys.open()) throw Error("--metrics-auth needs --api-key or --api-key-file");
  o.api.request_timeout = seconds(o.request_timeout_s);
  o.http.header_timeout = seconds(o.header_timeout_s);
  o.http.body_timeout = seconds(o.body_timeout_s);
  o.engine.models = served_models(o.models, o.model_name);
  o.api.cache = cache_settings(o.cache, o.engine.models);
  engine::validate(o.engine.spec);
  if (o.kv_mem_mib > 0) o.engine.instance.kv_bytes = static_cast<size_t>(o.kv_mem_mib * (1 << 20));
  const auto kv_type = gguf::type_info_by_name(o.kv_type);
  if (!kv_type || (kv_type->type != gguf::TensorType::F16 && kv_type->type != gguf::TensorType::Q8_0 &&
                   kv_type->type != gguf::TensorType::F32))
    throw Error("--kv-type must be f16, q8_0 or f32, not '" + o.kv_type + "'");
  o.engine.instance.kv_type = kv_type->type;
  raise_fd_limit(o.http.max_connections + o.http.reserved_connections);

  // Every thread started from here on inherits the blocked signals, so only
  // sigwait() below sees SIGTERM / SIGINT.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  server::Server srv(o.engine, o.api, o.http);
  srv.start();
  std::string names;
  for (const auto& m : o.engine.models) names += (names.empty() ? "" : ", ") + m.name;
  spdlog::info("serving {} on {} | {}", names, srv.url(),
               (o.api.keys.open() ? "no API key" : std::to_string(o.api.keys.size()) + " API key(s)") +
                   (o.api.admin_keys.open() ? "" : ", " + std::to_string(o.api.admin_keys.size()) + " admin key(s)"));
  for (int i = 0; i < srv.num_models(); ++i) {
    const server::ServedModel& m = srv.api().served_model(i);
    spdlog::info("model {} ({}): context {} | max seqs {} | queue {} | KV cache: {}", m.name, srv.model(i).path(),
                 srv.engine().info(i).max_context, srv.engine().config().max_seqs, o.api.max_queue,
                 model::describe(srv.model(i).kv_pool()));
    if (m.chat_template.is_fallback()) spdlog::info("model {} has no chat template: chat uses ChatML", m.name);
  }
  if (o.api.router.enabled())
    spdlog::info("router: model '{}' goes to {} or, at a score of {} or more, {}", o.api.router.name, o.api.router.small,
                 o.api.router.threshold, o.api.router.large);
  if (o.engine.spec.method != "off")
    spdlog::info("speculative decoding, every model: {}, up to {} draft tokens per step{}", o.engine.spec.method,
                 o.engine.spec.k, o.engine.spec.adaptive ? ", chosen per sequence and step" : "");
  spdlog::set_level(level);  // after the startup lines, which scripts read for the port

  int sig = 0;
  sigwait(&signals, &sig);
  spdlog::info("{}: no new requests; finishing {} in flight", signal_name(sig), srv.api().in_flight());
  // A second signal cuts the drain short; the exit code is a shell's for a
  // signal: 128 + its number (130 for SIGINT, 143 for SIGTERM).
  std::thread([signals] {
    int again = 0;
    sigwait(&signals, &again);
    spdlog::warn("{} again: exiting at once", signal_name(again));
    std::_Exit(128 + again);
  }).detach();
  if (!srv.drain(seconds(o.drain_timeout_s))) spdlog::warn("drain timeout: the requests still open were ended with an error");
  spdlog::info("stopped");
}

}  // namespace

void add_serve(CLI::App& app) {
  auto o = std::make_shared<ServeOptions>();
  CLI::App* cmd = app.add_subcommand("serve", "OpenAI-compatible HTTP server (/v1/completions, /v1/chat/completions)");
  cmd->add_option("-m,--model", o->models,
                  "GGUF model file, or NAME=FILE: repeat it to serve several models, a request's \"model\" picking one "
                  "(default: the built-in random-weight model)")
      ->allow_extra_args(false);
  cmd->add_option("--model-name", o->model_name, "Id of the one model in responses and /v1/models (default: the file name stem)");
  cmd->add_option("--host", o->http.host, "Address or host name to listen on")->capture_default_str();
  cmd->add_option("--port", o->http.port, "Port (0: any free one)")->capture_default_str()->check(in_range(0, 65535));
  add_key_flags(cmd, o->keys);
  cmd->add_flag("--metrics-auth", o->api.metrics_auth, "/metrics needs an API key too");
  cmd->add_option("--allowed-origins", o->api.allowed_origins, "CORS: origins browser pages may call from (comma-separated or repeatable; * for any)")
      ->delimiter(',')
      ->check(CLI::Validator([](std::string& e) { return server::origin_entry_error(e); }, "ORIGIN"));
  cmd->add_option("--rate-limit", o->api.rate_limit, "Requests per second per API key (per client address when open); 0: off")
      ->capture_default_str()->check(at_least(0));
  cmd->add_option("--rate-burst", o->api.rate_burst, "Token-bucket size for --rate-limit (default: max(1, rate))")
      ->check(at_least(0));
  cmd->add_option("--max-queue", o->api.max_queue, "Requests that may wait beyond --max-seqs before 429, per model")->capture_default_str()
      ->check(at_least(0));
  cmd->add_option("--timeout", o->request_timeout_s, "Per-request timeout, seconds, from arrival to the answer's end (0: none)")->capture_default_str()
      ->check(at_least(0));
  cmd->add_option("--max-connections", o->http.max_connections, "Open connections at most (a few more are kept for /health and /metrics)")
      ->capture_default_str()->check(at_least(1));
  cmd->add_option("--max-connections-per-client", o->http.max_connections_per_client,
                  "Open connections from one client address at most; more get 429 (behind a proxy, raise it)")
      ->capture_default_str()->check(at_least(1));
  cmd->add_option("--http-threads", o->http.threads, "HTTP I/O threads")->capture_default_str()->check(thread_count(1));
  cmd->add_option("--max-body", o->http.max_body_bytes, "Request body size limit, bytes (413 beyond)")->capture_default_str()
      ->check(at_least(1));
  cmd->add_option("--header-timeout", o->header_timeout_s, "Seconds for a request's headers to arrive")->capture_default_str()
      ->check(positive());
  cmd->add_option("--body-timeout", o->body_timeout_s, "Seconds for a request's body to arrive")->capture_default_str()
      ->check(positive());
  cmd->add_option("--max-json-depth", o->api.limits.max_json_depth, "JSON nesting limit")->capture_default_str()
      ->check(at_least(1));
  cmd->add_option("--max-prompt-tokens", o->api.max_prompt_tokens, "Prompt length limit (0: the context)")->capture_default_str()
      ->check(at_least(0));
  cmd->add_option("--max-tokens", o->api.limits.max_tokens, "Largest max_tokens a request may ask for")->capture_default_str()
      ->check(at_least(1));
  cmd->add_option("--max-n", o->api.limits.max_n, "Largest n a request may ask for")->capture_default_str()
      ->check(at_least(1));
  cmd->add_option("--drain-timeout", o->drain_timeout_s, "Seconds to finish in-flight requests after SIGTERM")->capture_default_str()
      ->check(at_least(0));
  cmd->add_option("-t,--threads", o->engine.threads, "Compute threads, shared by every model (0: default)")->capture_default_str()
      ->check(thread_count(0));
  cmd->add_option("--kv-mem", o->kv_mem_mib, "KV cache budget per model, MiB (default: sized from the model, context and --max-seqs)")
      ->check(positive());
  cmd->add_option("--kv-type", o->kv_type, "KV cache element type, every model's: f16, q8_0 or f32")->capture_default_str();
  cmd->add_option("--kv-blocks", o->engine.instance.kv_blocks, "Exact KV pool size in blocks, per model (overrides --kv-mem)")
      ->check(at_least(1));
  cmd->add_option("--max-seqs", o->engine.engine.max_seqs, "Sequences running at once, per model")->capture_default_str()->check(at_least(1));
  cmd->add_option("--max-batch-tokens", o->engine.instance.max_batch_tokens, "Tokens per engine step, per model")->capture_default_str()
      ->check(at_least(1));
  cmd->add_option("--ctx", o->engine.instance.max_context, "Context length, every model's (0: each model's own)")->capture_default_str()
      ->check(at_least(0));
  cmd->add_option("--log-level", o->log_level, "trace, debug, info, warn, error, off")->capture_default_str();
  add_spec_flags(cmd, o->engine.spec);
  gateway::RouterConfig& router = o->api.router;
  CLI::Option* small = cmd->add_option("--router-small", router.small, "Complexity router: the served model for easy requests");
  CLI::Option* large = cmd->add_option("--router-large", router.large, "Complexity router: the served model for hard requests");
  small->needs(large);
  large->needs(small);
  cmd->add_option("--router-name", router.name, "The \"model\" a request names to be routed")->capture_default_str()->needs(small);
  cmd->add_option("--router-threshold", router.threshold, "Router score (0..1) at or above which a request goes to --router-large")
      ->capture_default_str()->check(in_range(0, 1))->needs(small);
  add_cache_flags(cmd, o->cache);
  cmd->footer(
      "Several models (--model NAME=FILE, repeated) share the compute threads, the HTTP and request limits and the "
      "per-key rate limit. Each has its own KV pool (--kv-mem, --kv-blocks, --kv-type, --ctx and --max-batch-tokens "
      "apply to each), its own --max-seqs running sequences and --max-queue waiting requests, and its own speculative "
      "decoding: --spec applies to every model (a --draft-model must have each model's vocabulary). The engine steps "
      "each model with work in turn, so no model starves another. With --router-small and --router-large, a completion "
      "whose \"model\" is --router-name goes to one of the two as the complexity router scores it (see router-eval).");
  cmd->callback([o] { run_serve(*o); });
}

}  // namespace llmserve::cli
