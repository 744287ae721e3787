#pragma once
// HTTP/1.1 server (Boost.Beast on Asio): many connections on a few threads,
// each with hard deadlines. The header of a request must arrive within
// header_timeout of the connection becoming idle, the body within
// body_timeout after it, every write within write_timeout; header and body
// size caps. Connections are capped in all and per client address, and a
// few more are held in reserve for the reserved paths (health checks,
// metrics), so that a flood of idle sockets locks no one else out.
// While a response is pending the server keeps reading the socket, so a
// client that goes away (a reset) is noticed at once (its Exchange's
// on_close runs) even when nothing is being written; a client that only
// half-closed (shutdown(SHUT_WR)) after its request still gets the answer.
//
// The application sees one Exchange per request. All Exchange methods except
// post() must be called on the exchange's strand: the handler runs there,
// and post() (callable from any thread, e.g. the engine's) gets back there.
// Writes never block: bytes queue in the connection, and a client whose
// queue grows beyond max_pending_write_bytes is treated as gone.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace llmserve::server {

using Headers = std::vector<std::pair<std::string, std::string>>;

struct HttpConfig {
  std::string host = "127.0.0.1";  // an address or a name to resolve
  uint16_t port = 8080;  // 0: any free port (see HttpServer::port())
  int threads = 2;
  int max_connections = 512;
  int max_connections_per_client = 64;  // from one peer address; more are refused at once (429)
  // Beyond max_connections: connections that may only ask for reserved_paths
  // (other requests on them get 503).
  int reserved_connections = 8;
  std::vector<std::string> reserved_paths = {"/health", "/metrics"};
  std::chrono::milliseconds header_timeout{10'000};  // idle keep-alive wait + request line + headers
  std::chrono::milliseconds body_timeout{30'000};
  std::chrono::milliseconds write_timeout{30'000};  // one queued write to complete
  size_t max_header_bytes = 16 << 10;
  size_t max_body_bytes = 1 << 20;
  size_t max_pending_write_bytes = 8 << 20;
};

struct HttpRequest {
  std::string method;
  std::string target;  // path and query as sent
  Headers headers;     // names lower-case
  std::string body;
  std::string remote;  // peer address, for logs

  std::string_view path() const;                    // target without the query
  const std::string* header(std::string_view lower_name) const;  // nullptr when absent
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  Headers headers;  // extra headers (e.g. Retry-After)
};

class Exchange {
 public:
  virtual ~Exchange() = default;
  // Exactly one of: respond(), or begin_stream() + write()* + end_stream().
  // A HEAD request's answer goes without its body.
  virtual void respond(HttpResponse response) = 0;
  // Chunked; to an HTTP/1.0 client, the raw body ended by closing the connection.
  virtual void begin_stream(int status, std::string content_type, Headers headers) = 0;
  virtual void write(std::string_view data) = 0;  // one chunk
  virtual void end_stream() = 0;
  // The client went away (or stalled past the limits) before the response
  // ended: fn runs once on the strand. Set it from the handler.
  virtual void on_close(std::function<void()> fn) = 0;
  // The server stops before the response ended (its drain timed out): fn
  // runs once on the strand and should end the response at once.
  virtual void on_server_stop(std::function<void()> fn) = 0;
  // A response has begun, or the exchange is over (answered, or the client
  // went away): nothing more may start answering it.
  virtual bool answered() const = 0;
  // Runs fn on this exchange's strand. Any thread; never blocks.
  virtual void post(std::function<void()> fn) = 0;
  // Runs fn on the strand after `delay` unless the exchange ended first or a
  // later call replaced it (one timer per exchange).
  virtual void after(std::chrono::milliseconds delay, std::function<void()> fn) = 0;
};

using Handler = std::function<void(HttpRequest, std::shared_ptr<Exchange>)>;
// Builds the body of errors the HTTP layer itself answers (400, 413, 431, 503).
using ErrorPage = std::function<HttpResponse(int status, const std::string& message)>;

class HttpServer {
 public:
  // Binds and listens (throws Error naming the address on failure); serving
  // starts with start().
  HttpServer(HttpConfig config, Handler handler, ErrorPage error_page);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  uint16_t port() const;
  std::string url() const;  // http://ADDRESS:PORT of the listening socket, IPv6 in brackets
  void start();
  // Closes the listening socket; open connections go on.
  void stop_accepting();
  // Runs every pending exchange's on_server_stop (see Exchange).
  void end_exchanges();
  // Closes every connection and joins the threads.
  void stop();
  int open_connections() const;
  int active_exchanges() const;  // requests being answered

  struct Impl;  // opaque: Asio lives in the .cpp only

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace llmserve::server
