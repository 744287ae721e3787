#include "cli/key_flags.h"

#include <algorithm>

#include "core/error.h"

namespace llmserve::cli {

void add_key_flags(CLI::App* cmd, KeyFlags& f) {
  cmd->add_option("--api-key", f.api_keys,
                  "Accepted API key (repeatable), needed by /v1/*; /health and /metrics stay open (see --metrics-auth). "
                  "None and no --api-key-file: open server");
  cmd->add_option("--api-key-file", f.api_key_file, "File with one accepted API key per line");
  cmd->add_option("--admin-key", f.admin_keys,
                  "Admin key (repeatable): DELETE /v1/cache needs one, and an API key cannot clear the cache. It is not "
                  "an API key: where API keys are needed it gets 401. None and no --admin-key-file: only an open server "
                  "(no --api-key) lets anyone clear the cache");
  cmd->add_option("--admin-key-file", f.admin_key_file, "File with one admin key per line");
}

namespace {

// One role's keys from its two flags, `flag` and `flag`-file.
server::ApiKeys keys_of(const std::vector<std::string>& keys, const std::string& file, const std::string& flag) {
  const std::string file_flag = flag + "-file";
  if (!keys.empty() && !file.empty()) throw Error(file_flag + ": cannot be given with " + flag);
  if (!file.empty()) {
    try {
      return server::ApiKeys::from_file(file);
    } catch (const Error& e) {
      throw Error(file_flag + ": " + e.what());
    }
  }
  if (std::any_of(keys.begin(), keys.end(), [](const std::string& k) { return k.empty(); }))
    throw Error(flag + ": a key cannot be empty");
  return server::ApiKeys(keys);
}

}  // namespace

Keys keys_from(const KeyFlags& f) {
  Keys k{keys_of(f.api_keys, f.api_key_file, "--api-key"), keys_of(f.admin_keys, f.admin_key_file, "--admin-key")};
  if (k.admin.shares_a_key_with(k.api))
    throw Error(std::string(f.admin_key_file.empty() ? "--admin-key" : "--admin-key-file") + ": a key is also an API key (" +
                (f.api_key_file.empty() ? "--api-key" : "--api-key-file") + "); give each key one role");
  return k;
}

}  // namespace llmserve::cli
