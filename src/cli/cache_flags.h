#pragma once
// serve's response-cache flags (--cache, --cache-ttl, --cache-mem,
// --cache-tau, --cache-embedder, --cache-verify, --cache-verify-margin) and
// the settings they give, model names (a tau's, the embedder's) checked
// against the served models.
#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "server/cache_front.h"
#include "server/server.h"

namespace llmserve::cli {

struct CacheFlags {
  std::string mode = "off";
  double ttl_s = 600;
  double mem_mib = 256;
  std::vector<std::string> taus;  // T or NAME=T
  std::string embedder = "ngram";
  std::string verify = "on";
  double verify_margin = 0.5;
  std::string semantic_flag;  // a semantic-only flag given on the command line (checked against --cache)
};

void add_cache_flags(CLI::App* cmd, CacheFlags& flags);

// Throws Error naming the flag and value that is wrong.
server::CacheSettings cache_settings(const CacheFlags& flags, const std::vector<server::ModelFile>& served);

}  // namespace llmserve::cli
