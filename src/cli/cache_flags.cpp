#include "cli/cache_flags.h"

#include <algorithm>
#include <charconv>

#include "cli/flag_checks.h"
#include "core/error.h"

namespace llmserve::cli {

void add_cache_flags(CLI::App* cmd, CacheFlags& f) {
  auto semantic_only = [&f](const char* name) {
    return [&f, name](const std::string&) {
      if (f.semantic_flag.empty()) f.semantic_flag = name;
    };
  };
  cmd->add_option("--cache", f.mode,
                  "Response cache: off, exact (identical deterministic requests) or semantic (also prompts whose "
                  "embedding is within --cache-tau, verified by the model)")
      ->capture_default_str();
  cmd->add_option("--cache-ttl", f.ttl_s, "Seconds a cached answer lives")->capture_default_str()->check(positive());
  cmd->add_option("--cache-mem", f.mem_mib, "Response cache memory bound, MiB (least recently used answers go first)")
      ->capture_default_str()
      ->check(positive());
  cmd->add_option("--cache-tau", f.taus,
                  "Semantic threshold (cosine similarity in [0, 1]): T for every model or NAME=T for one (repeatable; "
                  "default 0.9)")
      ->each(semantic_only("--cache-tau"));
  cmd->add_option("--cache-embedder", f.embedder, "Prompt embeddings for the semantic layer: ngram or a served model's name")
      ->capture_default_str()
      ->each(semantic_only("--cache-embedder"));
  cmd->add_option("--cache-verify", f.verify,
                  "on: a semantic hit is served only if the model scores the cached answer after the new prompt at "
                  "least as well as after its own, less --cache-verify-margin; off: served as found")
      ->capture_default_str()
      ->each(semantic_only("--cache-verify"));
  cmd->add_option("--cache-verify-margin", f.verify_margin, "Nats of mean log-probability a verified hit may lose")
      ->capture_default_str()
      ->check(at_least(0))
      ->each(semantic_only("--cache-verify-margin"));
}

namespace {

// `text`: the threshold out of `given` (T or NAME=T).
double tau_value(const std::string& text, const std::string& given) {
  double v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || !(v >= 0 && v <= 1))
    throw Error("--cache-tau: the threshold must be a number between 0 and 1, not '" + given + "'");
  return v;
}

bool is_served(const std::string& name, const std::vector<server::ModelFile>& served) {
  return std::any_of(served.begin(), served.end(), [&](const server::ModelFile& m) { return m.name == name; });
}

}  // namespace

server::CacheSettings cache_settings(const CacheFlags& f, const std::vector<server::ModelFile>& served) {
  server::CacheSettings s;
  if (f.mode == "off") s.mode = server::CacheMode::Off;
  else if (f.mode == "exact") s.mode = server::CacheMode::Exact;
  else if (f.mode == "semantic") s.mode = server::CacheMode::Semantic;
  else throw Error("--cache: must be off, exact or semantic, not '" + f.mode + "'");
  if (!f.semantic_flag.empty() && s.mode != server::CacheMode::Semantic)
    throw Error(f.semantic_flag + ": needs --cache semantic");
  if (f.verify != "on" && f.verify != "off") throw Error("--cache-verify: must be on or off, not '" + f.verify + "'");
  // Bounded before the conversions, which would overflow.
  if (!(f.ttl_s <= 365.0 * 86400)) throw Error("--cache-ttl: at most one year (31536000 seconds)");
  if (!(f.mem_mib <= 1 << 20)) throw Error("--cache-mem: at most 1048576 MiB");
  s.ttl = std::chrono::milliseconds(static_cast<int64_t>(f.ttl_s * 1000));
  if (s.ttl.count() <= 0) throw Error("--cache-ttl: must be at least 0.001 seconds");
  s.max_bytes = static_cast<size_t>(f.mem_mib * (1 << 20));
  if (s.max_bytes == 0) throw Error("--cache-mem: must be at least 1 byte");
  for (const std::string& t : f.taus) {
    const size_t eq = t.find('=');
    if (eq == std::string::npos) {
      s.tau = tau_value(t, t);
    } else {
      const std::string name = t.substr(0, eq);
      if (name.empty()) throw Error("--cache-tau: '" + t + "': the model name before '=' is empty");
      if (!is_served(name, served)) throw Error("--cache-tau: '" + t + "': no served model is named '" + name + "'");
      if (!s.taus.emplace(name, tau_value(t.substr(eq + 1), t)).second)
        throw Error("--cache-tau: model '" + name + "' is given twice");
    }
  }
  if (f.embedder != "ngram" && !is_served(f.embedder, served))
    throw Error("--cache-embedder: must be ngram or a served model's name, not '" + f.embedder + "'");
  s.embedder = f.embedder;
  s.verify = f.verify == "on";
  s.verify_margin = f.verify_margin;
  return s;
}

}  // namespace llmserve::cli
