#pragma once
// Cross-origin access for browser clients (`serve --allowed-origins`):
// which origins may call the API, the headers that tell a browser so, and
// the answer to a preflight. With no origin allowed there are no CORS
// headers at all, and browsers keep pages of other origins out.
#include <optional>
#include <string>
#include <vector>

#include "server/http_server.h"

namespace llmserve::server {

// Why `entry` is not "*" nor an origin such as "https://app.example:8443"
// (scheme://host[:port]); "" when it is fine.
std::string origin_entry_error(const std::string& entry);

class CorsPolicy {
 public:
  CorsPolicy() = default;  // no origin allowed
  // Throws Error naming the first malformed entry.
  explicit CorsPolicy(const std::vector<std::string>& allowed_origins);

  bool enabled() const { return any_origin_ || !origins_.empty(); }
  // OPTIONS with Origin and Access-Control-Request-Method.
  static bool is_preflight(const HttpRequest& req);
  // The request's Origin when it may call the API.
  std::optional<std::string> allowed_origin(const HttpRequest& req) const;
  // For every response: Vary: Origin and, for an allowed origin, its
  // Access-Control-Allow-Origin and the headers scripts may read.
  Headers response_headers(const HttpRequest& req) const;
  // Added to response_headers() in the answer to an allowed preflight.
  Headers preflight_headers(const HttpRequest& req) const;

 private:
  bool any_origin_ = false;
  std::vector<std::string> origins_;  // lower-case, no trailing '/'
};

}  // namespace llmserve::server
