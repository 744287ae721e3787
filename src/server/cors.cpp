#include "server/cors.h"

#include <algorithm>
#include <cctype>

#include "core/error.h"

namespace llmserve::server {

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string without_trailing_slash(std::string s) {
  if (s.ends_with('/')) s.pop_back();
  return s;
}

// An HTTP header-name list ("authorization, content-type"), safe to echo.
bool header_name_list(std::string_view s) {
  if (s.empty() || s.size() > 1024) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || std::string_view("-_!#$%&'*+.^`|~, ").find(c) != std::string_view::npos;
  });
}

}  // namespace

std::string origin_entry_error(const std::string& entry) {
  if (entry == "*") return "";
  const std::string o = without_trailing_slash(entry);
  const size_t sep = o.find("://");
  if (sep == std::string::npos || sep == 0) return "'" + entry + "' is not an origin (scheme://host[:port], or *)";
  for (size_t i = 0; i < sep; ++i)
    if (!std::isalnum(static_cast<unsigned char>(o[i])) && o[i] != '+' && o[i] != '-' && o[i] != '.')
      return "'" + entry + "' has a malformed scheme";
  const std::string_view host = std::string_view(o).substr(sep + 3);
  if (host.empty()) return "'" + entry + "' has no host";
  for (char c : host)
    if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f || std::string_view("/?#@\\").find(c) != std::string_view::npos)
      return "'" + entry + "' is not an origin: it may hold no path, query or user (scheme://host[:port])";
  return "";
}

CorsPolicy::CorsPolicy(const std::vector<std::string>& allowed_origins) {
  for (const std::string& e : allowed_origins) {
    if (const std::string err = origin_entry_error(e); !err.empty()) throw Error("--allowed-origins: " + err);
    if (e == "*") any_origin_ = true;
    else origins_.push_back(lower(without_trailing_slash(e)));
  }
}

bool CorsPolicy::is_preflight(const HttpRequest& req) {
  return req.method == "OPTIONS" && req.header("origin") && req.header("access-control-request-method");
}

std::optional<std::string> CorsPolicy::allowed_origin(const HttpRequest& req) const {
  const std::string* origin = req.header("origin");
  if (!origin) return std::nullopt;
  if (any_origin_ || std::find(origins_.begin(), origins_.end(), lower(*origin)) != origins_.end()) return *origin;
  return std::nullopt;
}

Headers CorsPolicy::response_headers(const HttpRequest& req) const {
  if (!enabled()) return {};
  // The answer depends on Origin (allowed or not), so caches must key on it.
  Headers h = {{"Vary", "Origin"}};
  if (!allowed_origin(req)) return h;
  h.emplace_back("Access-Control-Allow-Origin", any_origin_ ? "*" : *req.header("origin"));
  h.emplace_back("Access-Control-Expose-Headers",
                 "x-request-id, x-ratelimit-limit-requests, x-ratelimit-remaining-requests, x-ratelimit-reset-requests, retry-after");
  return h;
}

Headers CorsPolicy::preflight_headers(const HttpRequest& req) const {
  const std::string* asked = req.header("access-control-request-headers");
  return {{"Access-Control-Allow-Methods", "GET, POST, OPTIONS"},
          {"Access-Control-Allow-Headers", asked && header_name_list(*asked) ? *asked : "authorization, content-type, x-request-id"},
          {"Access-Control-Max-Age", "600"}};
}

}  // namespace llmserve::server
