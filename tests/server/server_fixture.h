#pragma once
// The whole server over loopback HTTP, on a small synthetic model (random
// weights: the text is gibberish, the protocol is what is checked): the
// fixture the server's integration tests share.
#include <gtest/gtest.h>

#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/spdlog.h>

#include <thread>

#include "model/synthetic.h"
#include "server/http_client.h"
#include "server/server.h"
#include "test_models.h"

namespace llmserve::server {

// Per test process (ctest runs them in parallel), removed at exit.
inline std::string model_file() {
  static const llmserve::testing::TempFile file("server-tiny.gguf", [](const std::string& p) {
    model::SyntheticSpec spec;
    spec.shape = *model::find_shape("tiny");
    model::write_synthetic_model(spec, p);
  });
  return file.path();
}

// Collects the lines the server logs (through spdlog's default logger)
// while it lives; create it before the server, which may log until it stops.
class LogCapture {
 public:
  LogCapture() : sink_(std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(4096)), previous_(spdlog::default_logger()) {
    spdlog::set_default_logger(std::make_shared<spdlog::logger>("capture", sink_));
  }
  ~LogCapture() { spdlog::set_default_logger(previous_); }
  // The first line holding all of `parts`; waits for it (a request's line may
  // come just after its response), up to 20 s, then returns "".
  std::string line_with(const std::vector<std::string>& parts) const {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    do {
      for (const std::string& line : sink_->last_formatted()) {
        bool all = true;
        for (const auto& p : parts) all &= line.find(p) != std::string::npos;
        if (all) return line;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    } while (std::chrono::steady_clock::now() < deadline);
    return "";
  }

 private:
  std::shared_ptr<spdlog::sinks::ringbuffer_sink_mt> sink_;
  std::shared_ptr<spdlog::logger> previous_;
};

struct Options {
  std::vector<ModelFile> models;  // empty: the synthetic tiny model, named "tiny"
  ApiConfig api;
  HttpConfig http;
  int max_seqs = 8;
  engine::SpeculationOptions spec;
};

class ServerTest : public ::testing::Test {
 protected:
  void start(Options o = {}) {
    ModelConfig e;
    e.models = o.models.empty() ? std::vector<ModelFile>{{"tiny", model_file()}} : o.models;
    e.threads = 1;
    e.instance.kv_blocks = 256;
    e.engine.max_seqs = o.max_seqs;
    e.spec = o.spec;
    o.http.port = 0;
    server_ = std::make_unique<Server>(e, o.api, o.http);
    server_->start();
  }
  HttpClient client() { return HttpClient("127.0.0.1", server_->port(), std::chrono::seconds(60)); }
  HttpResult post(const std::string& path, const Json& body, Headers h = {}) {
    HttpClient c = client();
    return c.request("POST", path, body.dump(), h);
  }
  // Reads a gauge from /metrics.
  double metric(const std::string& name) {
    HttpClient c = client();
    const std::string text = c.request("GET", "/metrics", "").body;
    const size_t at = text.find("\n" + name + "{");
    if (at == std::string::npos) return -1;
    const size_t sp = text.find("} ", at);
    return std::stod(text.substr(sp + 2));
  }
  // Reads a counter (the sum of its series) from /metrics; -1 when absent.
  double metric_total(const std::string& name) {
    HttpClient c = client();
    const std::string text = c.request("GET", "/metrics", "").body;
    double total = -1;
    for (size_t at = 0; (at = text.find("\n" + name + "{", at)) != std::string::npos; ++at) {
      const size_t sp = text.find("} ", at);
      total = std::max(total, 0.0) + std::stod(text.substr(sp + 2));
    }
    return total;
  }
  // Polls until the engine holds no request and no KV block (bounded wait).
  bool settles_to_idle() {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (std::chrono::steady_clock::now() < deadline) {
      if (metric("llmserve:num_requests_in_flight") == 0 && metric("llmserve:kv_cache_blocks_used") == 0 &&
          metric("llmserve:num_requests_running") == 0)
        return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }
  std::unique_ptr<LogCapture> log_;  // when a test captures the log: outlives the server
  std::unique_ptr<Server> server_;
};

// data: payloads of an SSE body, [DONE] included.
inline std::vector<std::string> events(const std::string& body) {
  std::vector<std::string> out;
  size_t pos = 0;
  for (size_t end; (end = body.find("\n\n", pos)) != std::string::npos; pos = end + 2) {
    const std::string e = body.substr(pos, end - pos);
    EXPECT_TRUE(e.starts_with("data: ")) << e;
    out.push_back(e.substr(6));
  }
  EXPECT_EQ(pos, body.size()) << "trailing bytes after the last event";
  return out;
}

inline const std::string* find_header(const HttpResult& r, const std::string& name) {
  for (const auto& [k, v] : r.headers)
    if (k == name) return &v;
  return nullptr;
}

// A header's value, or "(none)".
inline std::string header(const HttpResult& r, const std::string& name) {
  const std::string* v = find_header(r, name);
  return v ? *v : "(none)";
}

}  // namespace llmserve::server
