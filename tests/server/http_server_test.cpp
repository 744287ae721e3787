// The HTTP layer alone (HttpServer with a small handler), driven over raw
// loopback sockets: half-closes, idle floods, HEAD, HTTP/1.0 and addresses.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>

#include "core/error.h"
#include "server/http_server.h"

namespace llmserve::server {
namespace {

// One TCP connection to 127.0.0.1 from the loopback address `from`
// (127.0.0.0/8 all reach the server, each a different client address).
class RawClient {
 public:
  RawClient(uint16_t port, const char* from = "127.0.0.1") : fd_(socket(AF_INET, SOCK_STREAM, 0)) {
    const timeval limit{20, 0};  // a reply that never comes fails the test, not hangs it
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
    sockaddr_in src{};
    src.sin_family = AF_INET;
    inet_pton(AF_INET, from, &src.sin_addr);
    sockaddr_in dst{};
    dst.sin_family = AF_INET;
    dst.sin_port = htons(port);
    inet_pton(AF_INET, "127.0.0.1", &dst.sin_addr);
    const bool ok = bind(fd_, reinterpret_cast<sockaddr*>(&src), sizeof src) == 0 &&
                    connect(fd_, reinterpret_cast<sockaddr*>(&dst), sizeof dst) == 0;
    EXPECT_TRUE(ok) << "connect from " << from;
  }
  ~RawClient() { close(fd_); }
  RawClient(const RawClient&) = delete;
  RawClient& operator=(const RawClient&) = delete;

  void send(const std::string& bytes) { ASSERT_EQ(::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL), ssize_t(bytes.size())); }
  void shut_write() { shutdown(fd_, SHUT_WR); }
  // Everything the server sends until it closes the connection.
  std::string read_all() {
    std::string out;
    char buf[4096];
    for (ssize_t n; (n = recv(fd_, buf, sizeof buf, 0)) > 0;) out.append(buf, size_t(n));
    return out;
  }

 private:
  int fd_;
};

std::string get(const std::string& path, const char* method = "GET", const char* version = "HTTP/1.1") {
  return std::string(method) + " " + path + " " + version + "\r\nHost: t\r\nConnection: close\r\n\r\n";
}

std::string body_of(const std::string& response) { return response.substr(response.find("\r\n\r\n") + 4); }

class HttpServerTest : public ::testing::Test {
 protected:
  void start(HttpConfig config, Handler handler = echo_path) {
    config.host = "127.0.0.1";
    config.port = 0;
    server_ = std::make_unique<HttpServer>(std::move(config), std::move(handler), [](int status, const std::string& message) {
      return HttpResponse{status, "text/plain", message, {}};
    });
    server_->start();
  }
  static void echo_path(HttpRequest req, std::shared_ptr<Exchange> ex) {
    ex->respond({200, "text/plain", "path " + std::string(req.path()), {}});
  }
  std::string exchange(const std::string& request, const char* from = "127.0.0.1") {
    RawClient c(server_->port(), from);
    c.send(request);
    return c.read_all();
  }
  // Waits (bounded) until the server holds `n` connections.
  bool holds_connections(int n) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (server_->open_connections() != n)
      if (std::chrono::steady_clock::now() > deadline) return false;
      else std::this_thread::sleep_for(std::chrono::milliseconds(5));
    return true;
  }

  std::unique_ptr<HttpServer> server_;
};

// A client that sends its request and then shutdown(SHUT_WR)s still reads
// the answer, even one that comes after the server has seen the EOF.
TEST_F(HttpServerTest, HalfClosedClientGetsItsAnswer) {
  std::atomic<bool> gone = false;
  start({}, [&](HttpRequest, std::shared_ptr<Exchange> ex) {
    ex->on_close([&] { gone = true; });
    ex->after(std::chrono::milliseconds(200), [ex] { ex->respond({200, "text/plain", "late answer", {}}); });
  });
  RawClient c(server_->port());
  c.send(get("/slow"));
  c.shut_write();
  const std::string r = c.read_all();
  EXPECT_TRUE(r.starts_with("HTTP/1.1 200")) << r;
  EXPECT_EQ(body_of(r), "late answer");
  EXPECT_FALSE(gone);
}

// Idle sockets from one address take at most its share: the next one from it
// is refused at once, and other clients are served.
TEST_F(HttpServerTest, IdleFloodFromOneAddressLocksNoOneElseOut) {
  HttpConfig config;
  config.max_connections = 32;
  config.max_connections_per_client = 8;
  start(config);
  std::vector<std::unique_ptr<RawClient>> idle;
  for (int i = 0; i < 64; ++i) idle.push_back(std::make_unique<RawClient>(server_->port()));
  const std::string refused = exchange(get("/v1/models"));
  EXPECT_TRUE(refused.starts_with("HTTP/1.1 429")) << refused;
  EXPECT_NE(refused.find("Retry-After: 1"), std::string::npos) << refused;
  EXPECT_EQ(body_of(exchange(get("/health"), "127.0.0.2")), "path /health");
  EXPECT_EQ(body_of(exchange(get("/v1/models"), "127.0.0.2")), "path /v1/models");
}

// With every connection taken, the reserve answers /health and /metrics only.
TEST_F(HttpServerTest, ReserveServesHealthAndMetricsWhenFull) {
  HttpConfig config;
  config.max_connections = 4;
  config.max_connections_per_client = 2;
  config.reserved_connections = 1;
  start(config);
  std::vector<std::unique_ptr<RawClient>> idle;
  for (const char* from : {"127.0.0.1", "127.0.0.1", "127.0.0.2", "127.0.0.2"})
    idle.push_back(std::make_unique<RawClient>(server_->port(), from));
  ASSERT_TRUE(holds_connections(4));
  const std::string busy = exchange(get("/v1/models"), "127.0.0.3");
  EXPECT_TRUE(busy.starts_with("HTTP/1.1 503")) << busy;
  for (const char* path : {"/health", "/metrics"}) {
    ASSERT_TRUE(holds_connections(4));  // the reserve slot is free again
    const std::string r = exchange(get(path), "127.0.0.3");
    EXPECT_EQ(body_of(r), "path " + std::string(path)) << r;
  }
}

}  // namespace
}  // namespace llmserve::server
