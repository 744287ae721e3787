#pragma once
// Errors the API answers with, as OpenAI shapes them:
//   {"error": {"message": ..., "type": ..., "param": ..., "code": ...}}
#include <chrono>
#include <stdexcept>
#include <string>

namespace llmserve::server {

struct ApiError : std::runtime_error {
  ApiError(int status, std::string message, std::string type = "invalid_request_error", std::string param = {},
           std::string code = {})
      : std::runtime_error(message), status(status), type(std::move(type)), param(std::move(param)), code(std::move(code)) {}

  int status;
  std::string type;   // invalid_request_error, authentication_error, rate_limit_error, ...
  std::string param;  // the offending request field, if any
  std::string code;   // machine-readable detail, if any
  int retry_after_s = 0;  // > 0: sent as Retry-After (429, 503)
  std::string allow;      // 405: the methods the URL takes, sent as Allow
};

// The JSON body for `e` (never throws; invalid UTF-8 is replaced).
std::string error_body(const ApiError& e);
// The error type OpenAI uses for an HTTP status.
const char* error_type_for(int status);

// A request's --timeout ran out (504), or the server's drain did (503).
ApiError timeout_error(std::chrono::milliseconds timeout);
ApiError drain_timeout_error();

}  // namespace llmserve::server
