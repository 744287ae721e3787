// llmserve bench-serve: an HTTP load generator for OpenAI-compatible
// servers. Streaming requests, timed on the client: TTFT (send -> first
// text), inter-token latency (between text events), TPOT ((e2e - TTFT) /
// (output tokens - 1)), end-to-end latency; request and token throughput,
// and goodput (requests per second that met the --slo-* targets).
//
// Against an llmserve server with a response cache it counts the requests
// per cache layer (the x-llmserve-cache header) and times each layer apart.
// It also reads the engine's own latency
// histograms from /metrics before and after the run: the same requests timed
// inside the engine, so the difference to the client's numbers is what HTTP,
// JSON and SSE add, free of the host's timing noise that separate runs carry.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <string_view>
#include <thread>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "core/error.h"
#include "server/http_client.h"

namespace llmserve::cli {

namespace {

using Clock = std::chrono::steady_clock;
using Json = nlohmann::json;

struct BenchOptions {
  std::string url = "http://127.0.0.1:8080";
  int concurrency = 0;
  double rate = 0;
  int num_prompts = 100;
  int input_len = 128;
  int output_len = 128;
  std::string dataset;
  std::string endpoint = "completions";
  std::string model;
  std::string api_key;
  double slo_ttft_ms = 0;
  double slo_tpot_ms = 0;
  std::string json_out;
  uint64_t seed = 0;
  double timeout_s = 600;
};

struct Prompt {
  Json fields;  // "prompt" (text or token ids) or "messages", and a dataset line's other request fields
  int output_len;
};

struct Sample {
  bool ok = false;
  int status = 0;
  std::string error;
  double ttft_ms = 0, e2e_ms = 0, tpot_ms = 0;
  std::vector<double> itl_ms;
  int prompt_tokens = 0, output_tokens = 0;
  std::string cache_layer;  // x-llmserve-cache: exact, semantic, miss or bypass; "" when not sent
};

// Synthetic completion prompts are token ids, so their length is exact
// whatever the tokenizer; ids are drawn from [100, 500), inside any real
// vocabulary. Chat prompts must be text: --input-len words.
std::vector<Prompt> make_prompts(const BenchOptions& o) {
  std::vector<Prompt> out;
  if (o.dataset.empty()) {
    std::mt19937_64 rng(o.seed);
    std::uniform_int_distribution<int> id(100, 499);
    for (int i = 0; i < o.num_prompts; ++i) {
      Json ids = Json::array();
      for (int k = 0; k < o.input_len; ++k) ids.push_back(id(rng));
      if (o.endpoint == "chat") {  // text: about one token per " a" in common vocabularies
        std::string text = std::to_string(i);
        for (int k = 0; k < o.input_len; ++k) text += " a";
        out.push_back({{{"messages", Json::array({{{"role", "user"}, {"content", text}}})}}, o.output_len});
      } else {
        out.push_back({{{"prompt", ids}}, o.output_len});
      }
    }
    return out;
  }
  // JSON lines: {"prompt": "..."} or {"messages": [...]}, optional "output_len"; any other field (e.g.
  // "temperature") goes into the request as given.
  std::ifstream in(o.dataset);
  if (!in) throw Error(o.dataset + ": cannot read the dataset");
  std::vector<Prompt> all;
  int line_no = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    Json j;
    try {
      j = Json::parse(line);
    } catch (const Json::exception& e) {
      throw Error(o.dataset + ":" + std::to_string(line_no) + ": " + e.what());
    }
    const char* key = o.endpoint == "chat" ? "messages" : "prompt";
    if (!j.is_object() || !j.contains(key))
      throw Error(o.dataset + ":" + std::to_string(line_no) + ": expected an object with \"" + key + "\"");
    const int len = j.contains("output_len") && j["output_len"].is_number_integer() ? j["output_len"].get<int>() : o.output_len;
    j.erase("output_len");
    all.push_back({j, len});
  }
  if (all.empty()) throw Error(o.dataset + ": no prompts");
  for (int i = 0; i < o.num_prompts; ++i) out.push_back(all[static_cast<size_t>(i) % all.size()]);
  return out;
}

double ms(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double, std::milli>(b - a).count(); }

// Splits an SSE byte stream into "data:" payloads.
class SseReader {
 public:
  template <class F>
  void feed(std::string_view bytes, F&& on_event) {
    buf_.append(bytes);
    for (size_t end; (end = buf_.find("\n\n")) != std::string::npos;) {
      std::string event = buf_.substr(0, end);
      buf_.erase(0, end + 2);
      if (event.starts_with("data: ")) on_event(std::string_view(event).substr(6));
    }
  }

 private:
  std::string buf_;
};

Sample run_one(server::HttpClient& client, const server::Url& url, const BenchOptions& o, const Prompt& p) {
  Json body = p.fields;
  body.update({{"model", o.model}, {"max_tokens", p.output_len}, {"stream", true}, {"stream_options", {{"include_usage", true}}}});
  server::Headers headers;
  if (!o.api_key.empty()) headers.emplace_back("Authorization", "Bearer " + o.api_key);
  const std::string target = url.base_path + (o.endpoint == "chat" ? "/v1/chat/completions" : "/v1/completions");

  Sample s;
  SseReader sse;
  const auto t0 = Clock::now();
  Clock::time_point last{};
  std::string error_body;
  auto on_data = [&](std::string_view data) {
    sse.feed(data, [&](std::string_view ev) {
      if (ev == "[DONE]") return;
      const Json j = Json::parse(ev, nullptr, false);
      if (j.is_discarded()) return;
      if (j.contains("error")) {
        s.error = j["error"].value("message", "error event");
        return;
      }
      if (j.contains("usage") && j["usage"].is_object()) {
        s.prompt_tokens = j["usage"].value("prompt_tokens", 0);
        s.output_tokens = j["usage"].value("completion_tokens", 0);
      }
      bool text = false;
      for (const auto& c : j.value("choices", Json::array())) {
        if (c.contains("text") && c["text"].is_string() && !c["text"].get_ref<const std::string&>().empty()) text = true;
        if (c.contains("delta") && c["delta"].contains("content") && c["delta"]["content"].is_string() &&
            !c["delta"]["content"].get_ref<const std::string&>().empty())
          text = true;
      }
      if (!text) return;
      const auto now = Clock::now();
      if (last == Clock::time_point{}) s.ttft_ms = ms(t0, now);
      else s.itl_ms.push_back(ms(last, now));
      last = now;
    });
  };
  server::HttpResult r = client.request("POST", target, body.dump(), headers, [&](std::string_view d) {
    if (error_body.size() < 4096) error_body.append(d);
    on_data(d);
  });
  s.e2e_ms = ms(t0, Clock::now());
  s.status = r.status;
  for (const auto& [name, value] : r.headers)
    if (name == "x-llmserve-cache") s.cache_layer = value;
  if (r.status != 200) {
    s.error = r.status == 0 ? r.error : "HTTP " + std::to_string(r.status) + ": " + error_body.substr(0, 200);
    return s;
  }
  if (!s.error.empty()) return s;
  s.ok = true;
  if (s.output_tokens > 1) s.tpot_ms = (s.e2e_ms - s.ttft_ms) / (s.output_tokens - 1);
  return s;
}

struct Stats {
  double mean = 0, p50 = 0, p90 = 0, p99 = 0;
};

Stats stats(std::vector<double> v) {
  Stats s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  double sum = 0;
  for (double x : v) sum += x;
  s.mean = sum / static_cast<double>(v.size());
  auto pct = [&](double q) {  // linear interpolation between closest ranks
    const double pos = q * static_cast<double>(v.size() - 1);
    const size_t lo = static_cast<size_t>(pos);
    const size_t hi = std::min(lo + 1, v.size() - 1);
    return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
  };
  s.p50 = pct(0.5);
  s.p90 = pct(0.9);
  s.p99 = pct(0.99);
  return s;
}

// The completed requests a response-cache layer answered and their latency.
struct CacheLayer {
  const char* name;
  int count;
  double share;  // of the completed requests
  Stats e2e, ttft;
};

// One entry per layer of x-llmserve-cache; none when the server sent no such
// header (another server, or llmserve without --cache).
std::vector<CacheLayer> cache_layers(const std::vector<Sample>& samples, int completed) {
  std::vector<CacheLayer> layers;
  const bool sent = std::any_of(samples.begin(), samples.end(), [](const Sample& s) { return !s.cache_layer.empty(); });
  if (!sent) return layers;
  for (const char* name : {"exact", "semantic", "miss", "bypass"}) {
    std::vector<double> e2e, ttft;
    for (const Sample& s : samples)
      if (s.ok && s.cache_layer == name) {
        e2e.push_back(s.e2e_ms);
        ttft.push_back(s.ttft_ms);
      }
    const int count = static_cast<int>(e2e.size());
    const double share = completed > 0 ? static_cast<double>(count) / completed : 0;
    layers.push_back({name, count, share, stats(std::move(e2e)), stats(std::move(ttft))});
  }
  return layers;
}

// GET url + path on a connection of its own, with the API key if any.
server::HttpResult get(const server::Url& url, const BenchOptions& o, const std::string& path) {
  server::HttpClient c(url.host, url.port, std::chrono::seconds(30));
  server::Headers h;
  if (!o.api_key.empty()) h.emplace_back("Authorization", "Bearer " + o.api_key);
  return c.request("GET", url.base_path + path, "", h);
}

std::string discover_model(const server::Url& url, const BenchOptions& o) {
  const auto r = get(url, o, "/v1/models");
  if (r.status != 200) throw Error("GET /v1/models: " + (r.status ? "HTTP " + std::to_string(r.status) + " " + r.body : r.error));
  const Json j = Json::parse(r.body, nullptr, false);
  if (j.is_discarded() || !j.contains("data") || j["data"].empty()) throw Error("GET /v1/models: no model listed");
  return j["data"][0].value("id", "");
}

// Sums and counts of the engine-side latency histograms (seconds).
struct ServerLatency {
  bool found = false;
  double ttft_sum = 0, ttft_count = 0, tpot_sum = 0, tpot_count = 0;
};

ServerLatency scrape_server_latency(const server::Url& url, const BenchOptions& o) {
  const auto r = get(url, o, "/metrics");
  ServerLatency s;
  if (r.status != 200) return s;
  const std::pair<std::string_view, double*> wanted[] = {
      {"llmserve:time_to_first_token_seconds_sum", &s.ttft_sum},
      {"llmserve:time_to_first_token_seconds_count", &s.ttft_count},
      {"llmserve:inter_token_latency_seconds_sum", &s.tpot_sum},
      {"llmserve:inter_token_latency_seconds_count", &s.tpot_count}};
  int seen = 0;
  std::string_view rest = r.body;
  while (!rest.empty()) {
    const size_t eol = rest.find('\n');
    const std::string_view line = rest.substr(0, eol);
    rest = eol == std::string_view::npos ? std::string_view{} : rest.substr(eol + 1);
    // `name{labels} value` or `name value`
    for (const auto& [name, out] : wanted)
      if (line.starts_with(name) && line.size() > name.size() && (line[name.size()] == '{' || line[name.size()] == ' ')) {
        *out = std::strtod(std::string(line.substr(line.rfind(' ') + 1)).c_str(), nullptr);
        ++seen;
      }
  }
  s.found = seen == 4;
  return s;
}

void run_bench(BenchOptions o) {
  if (o.num_prompts < 1) throw Error("--num-prompts must be >= 1");
  if (o.concurrency < 0 || o.rate < 0) throw Error("--concurrency and --rate must be positive");
  if (o.concurrency == 0 && o.rate == 0) o.concurrency = 1;
  if (o.input_len < 1 || o.output_len < 1) throw Error("--input-len and --output-len must be >= 1");
  if (o.endpoint != "completions" && o.endpoint != "chat") throw Error("--endpoint must be completions or chat");
  const server::Url url = server::parse_url(o.url);
  if (o.model.empty()) o.model = discover_model(url, o);
  const std::vector<Prompt> prompts = make_prompts(o);
  const ServerLatency server_before = scrape_server_latency(url, o);

  // Arrival times: all at once for --concurrency, Poisson at --rate.
  std::vector<double> arrival_s(prompts.size(), 0.0);
  if (o.rate > 0) {
    std::mt19937_64 rng(o.seed + 1);
    std::exponential_distribution<double> gap(o.rate);
    double t = 0;
    for (double& a : arrival_s) a = (t += gap(rng));
  }
  // With --rate alone, enough workers that arrivals are not held back.
  const int workers = o.concurrency > 0 ? std::min(o.concurrency, o.num_prompts) : std::min(o.num_prompts, 512);

  std::vector<Sample> samples(prompts.size());
  std::atomic<size_t> next{0};
  const auto start = Clock::now();
  std::vector<std::thread> threads;
  for (int w = 0; w < workers; ++w) {
    threads.emplace_back([&] {
      server::HttpClient client(url.host, url.port, std::chrono::milliseconds(static_cast<int64_t>(o.timeout_s * 1000)));
      for (size_t i; (i = next.fetch_add(1)) < prompts.size();) {
        std::this_thread::sleep_until(start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(arrival_s[i])));
        samples[i] = run_one(client, url, o, prompts[i]);
      }
    });
  }
  for (auto& t : threads) t.join();
  const double duration_s = std::chrono::duration<double>(Clock::now() - start).count();
  const ServerLatency server_after = scrape_server_latency(url, o);

  std::vector<double> ttft, tpot, itl, e2e;
  int ok = 0, good = 0;
  long in_tokens = 0, out_tokens = 0;
  std::map<std::string, int> failures;
  for (const Sample& s : samples) {
    if (!s.ok) {
      ++failures[s.status ? "HTTP " + std::to_string(s.status) : "transport: " + s.error.substr(0, 80)];
      continue;
    }
    ++ok;
    in_tokens += s.prompt_tokens;
    out_tokens += s.output_tokens;
    ttft.push_back(s.ttft_ms);
    e2e.push_back(s.e2e_ms);
    if (s.output_tokens > 1) tpot.push_back(s.tpot_ms);
    itl.insert(itl.end(), s.itl_ms.begin(), s.itl_ms.end());
    const bool meets = (o.slo_ttft_ms <= 0 || s.ttft_ms <= o.slo_ttft_ms) && (o.slo_tpot_ms <= 0 || s.tpot_ms <= o.slo_tpot_ms);
    good += meets;
  }
  const Stats st_ttft = stats(ttft), st_tpot = stats(tpot), st_itl = stats(itl), st_e2e = stats(e2e);
  const std::vector<CacheLayer> layers = cache_layers(samples, ok);

  Json j = {{"url", o.url},
            {"endpoint", o.endpoint},
            {"model", o.model},
            {"num_prompts", o.num_prompts},
            {"concurrency", o.concurrency},
            {"request_rate", o.rate},
            {"input_len", o.dataset.empty() ? Json(o.input_len) : Json(nullptr)},
            {"output_len", o.output_len},
            {"dataset", o.dataset},
            {"duration_s", duration_s},
            {"completed", ok},
            {"failed", o.num_prompts - ok},
            {"failures", failures},
            {"total_input_tokens", in_tokens},
            {"total_output_tokens", out_tokens},
            {"request_throughput", ok / duration_s},
            {"output_throughput", static_cast<double>(out_tokens) / duration_s},
            {"total_token_throughput", static_cast<double>(in_tokens + out_tokens) / duration_s},
            {"slo_ttft_ms", o.slo_ttft_ms},
            {"slo_tpot_ms", o.slo_tpot_ms},
            {"goodput", good / duration_s}};
  auto put = [&](const char* name, const Stats& s) {
    j[std::string("mean_") + name + "_ms"] = s.mean;
    j[std::string("p50_") + name + "_ms"] = s.p50;
    j[std::string("p90_") + name + "_ms"] = s.p90;
    j[std::string("p99_") + name + "_ms"] = s.p99;
  };
  put("ttft", st_ttft);
  put("tpot", st_tpot);
  put("itl", st_itl);
  put("e2e", st_e2e);
  for (const CacheLayer& l : layers) {  // latencies null for a layer that answered nothing
    auto t = [&](double v) { return l.count > 0 ? Json(v) : Json(nullptr); };
    j["cache"][l.name] = {{"count", l.count},            {"share", l.share},             {"mean_e2e_ms", t(l.e2e.mean)},
                          {"p50_e2e_ms", t(l.e2e.p50)},   {"p99_e2e_ms", t(l.e2e.p99)},   {"mean_ttft_ms", t(l.ttft.mean)},
                          {"p50_ttft_ms", t(l.ttft.p50)}, {"p99_ttft_ms", t(l.ttft.p99)}};
  }
  // The engine's view of this run's requests (meaningful while nothing else
  // loads the server): mean TTFT and TPOT, and the client's excess over them.
  // Not with cache hits: those never reach the engine, so the two views differ
  // in which requests they time.
  const double engine_tokens = server_after.tpot_count - server_before.tpot_count;
  const double engine_firsts = server_after.ttft_count - server_before.ttft_count;
  const bool cache_hits = std::any_of(layers.begin(), layers.end(), [](const CacheLayer& l) {
    return l.count > 0 && (std::string_view(l.name) == "exact" || std::string_view(l.name) == "semantic");
  });
  const bool engine_view =
      server_before.found && server_after.found && engine_tokens > 0 && engine_firsts > 0 && !cache_hits;
  double engine_ttft_ms = 0, engine_tpot_ms = 0;
  if (engine_view) {
    engine_ttft_ms = (server_after.ttft_sum - server_before.ttft_sum) / engine_firsts * 1e3;
    engine_tpot_ms = (server_after.tpot_sum - server_before.tpot_sum) / engine_tokens * 1e3;
    j["engine_mean_ttft_ms"] = engine_ttft_ms;
    j["engine_mean_tpot_ms"] = engine_tpot_ms;
    j["http_overhead_per_token_ms"] = st_tpot.mean - engine_tpot_ms;
    j["http_overhead_tpot_frac"] = (st_tpot.mean - engine_tpot_ms) / engine_tpot_ms;
  }

  FILE* table = o.json_out == "-" ? stderr : stdout;
  std::fprintf(table, "============ bench-serve: %s (%s) ============\n", o.url.c_str(), o.model.c_str());
  std::fprintf(table, "%-32s %d / %d\n", "Successful requests:", ok, o.num_prompts);
  for (const auto& [why, n] : failures) std::fprintf(table, "  failed (%s): %d\n", why.c_str(), n);
  std::fprintf(table, "%-32s %s\n", "Load:",
               o.rate > 0 ? ("Poisson " + std::to_string(o.rate) + " req/s").c_str()
                          : ("concurrency " + std::to_string(o.concurrency)).c_str());
  std::fprintf(table, "%-32s %.2f\n", "Duration (s):", duration_s);
  std::fprintf(table, "%-32s %ld\n", "Total input tokens:", in_tokens);
  std::fprintf(table, "%-32s %ld\n", "Total output tokens:", out_tokens);
  std::fprintf(table, "%-32s %.2f\n", "Request throughput (req/s):", ok / duration_s);
  std::fprintf(table, "%-32s %.2f\n", "Output token throughput (tok/s):", out_tokens / duration_s);
  std::fprintf(table, "%-32s %.2f\n", "Total token throughput (tok/s):", (in_tokens + out_tokens) / duration_s);
  if (o.slo_ttft_ms > 0 || o.slo_tpot_ms > 0)
    std::fprintf(table, "%-32s %.2f  (TTFT <= %.0f ms, TPOT <= %.0f ms)\n", "Goodput (req/s):", good / duration_s,
                 o.slo_ttft_ms, o.slo_tpot_ms);
  std::fprintf(table, "%-10s %10s %10s %10s %10s\n", "(ms)", "mean", "p50", "p90", "p99");
  for (const auto& [name, s] : {std::pair{"TTFT", st_ttft}, {"TPOT", st_tpot}, {"ITL", st_itl}, {"E2E", st_e2e}})
    std::fprintf(table, "%-10s %10.2f %10.2f %10.2f %10.2f\n", name, s.mean, s.p50, s.p90, s.p99);
  if (!layers.empty()) {
    std::fprintf(table, "Response cache (x-llmserve-cache), E2E and TTFT in ms:\n");
    std::fprintf(table, "%-10s %8s %7s %9s %9s %9s %9s %9s %9s\n", "layer", "requests", "share", "E2E mean", "E2E p50",
                 "E2E p99", "TTFT mean", "TTFT p50", "TTFT p99");
    for (const CacheLayer& l : layers) {
      std::fprintf(table, "%-10s %8d %6.1f%%", l.name, l.count, 100 * l.share);
      for (double v : {l.e2e.mean, l.e2e.p50, l.e2e.p99, l.ttft.mean, l.ttft.p50, l.ttft.p99})
        if (l.count > 0) std::fprintf(table, " %9.2f", v);
        else std::fprintf(table, " %9s", "-");
      std::fprintf(table, "\n");
    }
  }
  if (engine_view) {
    std::fprintf(table, "%-32s TTFT %.2f, TPOT %.3f\n", "Engine-side mean (ms):", engine_ttft_ms, engine_tpot_ms);
    std::fprintf(table, "%-32s %.3f ms per output token (%.2f%% of TPOT), TTFT +%.2f ms\n", "HTTP + client overhead:",
                 st_tpot.mean - engine_tpot_ms, 100 * (st_tpot.mean - engine_tpot_ms) / engine_tpot_ms,
                 st_ttft.mean - engine_ttft_ms);
  }
  if (!o.json_out.empty()) {
    const std::string text = j.dump(2) + "\n";
    if (o.json_out == "-") {
      std::fputs(text.c_str(), stdout);
    } else {
      std::ofstream f(o.json_out);
      if (!(f << text)) throw Error(o.json_out + ": cannot write");
    }
  }
  if (ok == 0) throw Error("no request succeeded");
}

}  // namespace

void add_bench_serve(CLI::App& app) {
  auto o = std::make_shared<BenchOptions>();
  CLI::App* cmd = app.add_subcommand("bench-serve", "Load-test an OpenAI-compatible server with streaming requests");
  cmd->add_option("--url", o->url, "Server base URL")->capture_default_str();
  auto* conc = cmd->add_option("--concurrency", o->concurrency, "Requests in flight at once (closed loop)");
  cmd->add_option("--rate", o->rate, "Poisson arrivals, requests per second (open loop)")->excludes(conc);
  cmd->add_option("--num-prompts", o->num_prompts, "Requests to send")->capture_default_str();
  cmd->add_option("--input-len", o->input_len, "Synthetic prompt length, tokens")->capture_default_str();
  cmd->add_option("--output-len", o->output_len, "max_tokens per request")->capture_default_str();
  cmd->add_option("--dataset", o->dataset,
                  "JSON lines: {\"prompt\": ...} or {\"messages\": [...]}, optional \"output_len\"; other fields (e.g. "
                  "\"temperature\") are sent with the request");
  cmd->add_option("--endpoint", o->endpoint, "completions or chat")->capture_default_str();
  cmd->add_option("--model", o->model, "Model name to send (default: the first of /v1/models)");
  cmd->add_option("--api-key", o->api_key, "API key (Authorization: Bearer)");
  cmd->add_option("--slo-ttft", o->slo_ttft_ms, "Goodput: TTFT target, ms");
  cmd->add_option("--slo-tpot", o->slo_tpot_ms, "Goodput: TPOT target, ms");
  cmd->add_option("--json", o->json_out, "Also write the results as JSON to this file ('-': stdout, table to stderr)");
  cmd->add_option("--seed", o->seed, "Seed for synthetic prompts and arrivals")->capture_default_str();
  cmd->add_option("--timeout", o->timeout_s, "Per-request timeout, seconds")->capture_default_str();
  cmd->callback([o] { run_bench(*o); });
}

}  // namespace llmserve::cli
