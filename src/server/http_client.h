#pragma once
// A small blocking HTTP/1.1 client over one keep-alive connection (Beast),
// for bench-serve and the tests: bodies can be read as they arrive, which
// is what measuring time to first token over SSE needs.
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "server/http_server.h"

namespace llmserve::server {

struct Url {
  std::string host;
  uint16_t port = 80;
  std::string base_path;  // without a trailing '/'
};
// Accepts http://HOST[:PORT][/PATH]. Throws Error otherwise.
Url parse_url(const std::string& url);

struct HttpResult {
  int status = 0;       // 0: no response (see error)
  std::string error;    // transport problem
  std::string body;     // unless a body callback took it
  Headers headers;      // names lower-case
};

class HttpClient {
 public:
  HttpClient(std::string host, uint16_t port, std::chrono::milliseconds timeout = std::chrono::seconds(600));
  ~HttpClient();

  // on_body, when given, receives the body piece by piece as it arrives
  // (then HttpResult::body stays empty). Reconnects when the server closed
  // the previous connection.
  HttpResult request(const std::string& method, const std::string& target, const std::string& body,
                     const Headers& headers = {}, const std::function<void(std::string_view)>& on_body = {});
  // Drops the connection (e.g. to act as a client that went away).
  void close();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace llmserve::server
