#pragma once
// serve's key flags: the API keys (--api-key, repeatable, or --api-key-file)
// and the admin keys, which alone may clear the response cache
// (--admin-key, repeatable, or --admin-key-file), each checked on its own
// and against the other.
#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "server/rate_limiter.h"

namespace llmserve::cli {

struct KeyFlags {
  std::vector<std::string> api_keys;
  std::string api_key_file;
  std::vector<std::string> admin_keys;
  std::string admin_key_file;
};

void add_key_flags(CLI::App* cmd, KeyFlags& flags);

struct Keys {
  server::ApiKeys api, admin;  // none: open / no admin key
};

// Throws Error naming the flag that is wrong: a key and a key file both
// given, an empty key, a file that cannot be read or holds no key, or an
// admin key that is also an API key.
Keys keys_from(const KeyFlags& flags);

}  // namespace llmserve::cli
