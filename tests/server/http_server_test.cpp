// The HTTP layer alone (HttpServer with a small handler), driven over raw
// loopback sockets: half-closes, idle floods, HEAD, HTTP/1.0 and addresses.
#include <gtest/gtest.h>

#include <thread>

#include "core/error.h"
#include "raw_client.h"
#include "server/http_server.h"

namespace llmserve::server {
namespace {

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
  // Reads a keep-alive answer up to the end of its expected body.
  static std::string read_answer(RawClient& c, const std::string& body) {
    std::string r;
    while (!r.ends_with(body)) {
      const std::string more = c.read_some();
      if (more.empty()) break;
      r += more;
    }
    EXPECT_EQ(body_of(r), body) << r;
    return r;
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

// A later after() replaces an earlier one even when that one's time is up
// and its handler already waits for the strand (the server has 2 threads).
TEST_F(HttpServerTest, ALaterTimerReplacesAnExpiredOne) {
  std::atomic<bool> stale_ran = false;
  start({}, [&](HttpRequest, std::shared_ptr<Exchange> ex) {
    ex->after(std::chrono::milliseconds(0), [&] { stale_ran = true; });
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the timer expires while the strand is busy
    ex->after(std::chrono::milliseconds(20), [ex] { ex->respond({200, "text/plain", "answered", {}}); });
  });
  RawClient c(server_->port());
  c.send(raw_request("/"));
  EXPECT_EQ(body_of(c.read_all()), "answered");
  EXPECT_FALSE(stale_ran);
}

// A client that sends its request and then shutdown(SHUT_WR)s still reads
// the answer, even one that comes after the server has seen the EOF.
TEST_F(HttpServerTest, HalfClosedClientGetsItsAnswer) {
  std::atomic<bool> gone = false;
  start({}, [&](HttpRequest, std::shared_ptr<Exchange> ex) {
    ex->on_close([&] { gone = true; });
    ex->after(std::chrono::milliseconds(200), [ex] { ex->respond({200, "text/plain", "late answer", {}}); });
  });
  RawClient c(server_->port());
  c.send(raw_request("/slow"));
  c.shut_write();
  const std::string r = c.read_all();
  EXPECT_TRUE(r.starts_with("HTTP/1.1 200")) << r;
  EXPECT_EQ(body_of(r), "late answer");
  EXPECT_FALSE(gone);
}

// A keep-alive client that half-closes after its request gets its answer,
// and then the server closes: no request can follow, so the connection's
// slot does not wait out the idle timeout.
TEST_F(HttpServerTest, HalfClosedKeepAliveClientIsClosedAfterItsAnswer) {
  HttpConfig config;
  config.header_timeout = std::chrono::minutes(10);
  start(config, [](HttpRequest req, std::shared_ptr<Exchange> ex) {  // answers after the EOF has been read
    ex->after(std::chrono::milliseconds(100), [ex, path = std::string(req.path())] {
      ex->respond({200, "text/plain", "path " + path, {}});
    });
  });
  RawClient c(server_->port());
  c.send("GET /late HTTP/1.1\r\nHost: t\r\n\r\n");
  c.shut_write();
  const std::string r = read_answer(c, "path /late");
  EXPECT_NE(r.find("Connection: keep-alive\r\n"), std::string::npos) << r;
  EXPECT_TRUE(holds_connections(0)) << server_->open_connections() << " still open";
}

// Clients that each send one keep-alive request, read the answer and close:
// the server lets every connection go, whichever comes first of its own
// write's completion and the client's EOF. That order is a race, so each
// run checks it many times (a server that keeps such connections fails 11
// of 15 runs at 100 clients).
TEST_F(HttpServerTest, ClosedKeepAliveConnectionsAreReleased) {
  HttpConfig config;
  config.header_timeout = std::chrono::minutes(10);
  config.max_connections_per_client = 600;
  config.max_connections = 600;
  start(config);
  for (int i = 0; i < 500; ++i) {
    RawClient c(server_->port());
    c.send("GET /x HTTP/1.1\r\nHost: t\r\n\r\n");
    read_answer(c, "path /x");
  }
  EXPECT_TRUE(holds_connections(0)) << server_->open_connections() << " still open";
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
  const std::string refused = exchange(raw_request("/v1/models"));
  EXPECT_TRUE(refused.starts_with("HTTP/1.1 429")) << refused;
  EXPECT_NE(refused.find("Retry-After: 1"), std::string::npos) << refused;
  EXPECT_EQ(body_of(exchange(raw_request("/health"), "127.0.0.2")), "path /health");
  EXPECT_EQ(body_of(exchange(raw_request("/v1/models"), "127.0.0.2")), "path /v1/models");
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
  const std::string busy = exchange(raw_request("/v1/models"), "127.0.0.3");
  EXPECT_TRUE(busy.starts_with("HTTP/1.1 503")) << busy;
  for (const char* path : {"/health", "/metrics"}) {
    ASSERT_TRUE(holds_connections(4));  // the reserve slot is free again
    const std::string r = exchange(raw_request(path), "127.0.0.3");
    EXPECT_EQ(body_of(r), "path " + std::string(path)) << r;
  }
}

TEST_F(HttpServerTest, HeadAnswersWithoutBody) {
  start({});
  const std::string r = exchange(raw_request("/health", "HEAD"));
  EXPECT_TRUE(r.starts_with("HTTP/1.1 200")) << r;
  EXPECT_NE(r.find("Content-Length: 12\r\n"), std::string::npos) << r;  // as for GET
  EXPECT_EQ(body_of(r), "");
}

// HTTP/1.0 has no chunked encoding: the stream is the raw body, ended by
// closing the connection. HTTP/1.1 gets chunks.
TEST_F(HttpServerTest, StreamToHttp10ClientIsNotChunked) {
  start({}, [](HttpRequest, std::shared_ptr<Exchange> ex) {
    ex->begin_stream(200, "text/event-stream", {});
    ex->write("data: 1\n\n");
    ex->write("data: 2\n\n");
    ex->end_stream();
  });
  const std::string old = exchange(raw_request("/stream", "GET", "HTTP/1.0"));
  EXPECT_EQ(old.find("Transfer-Encoding"), std::string::npos) << old;
  EXPECT_NE(old.find("Connection: close\r\n"), std::string::npos) << old;
  EXPECT_EQ(body_of(old), "data: 1\n\ndata: 2\n\n");
  const std::string chunked = exchange(raw_request("/stream"));
  EXPECT_NE(chunked.find("Transfer-Encoding: chunked\r\n"), std::string::npos) << chunked;
  EXPECT_EQ(body_of(chunked), "9\r\ndata: 1\n\n\r\n9\r\ndata: 2\n\n\r\n0\r\n\r\n");
}

// A pending exchange is told when the server stops, and can still answer.
TEST_F(HttpServerTest, EndExchangesRunsTheirServerStopHandlers) {
  std::atomic<bool> waiting = false;
  start({}, [&](HttpRequest, std::shared_ptr<Exchange> ex) {
    ex->on_server_stop([ex] { ex->respond({503, "text/plain", "stopping", {}}); });
    waiting = true;
  });
  RawClient c(server_->port());
  c.send(raw_request("/wait"));
  while (!waiting) std::this_thread::yield();
  server_->end_exchanges();
  const std::string r = c.read_all();
  EXPECT_TRUE(r.starts_with("HTTP/1.1 503")) << r;
  EXPECT_EQ(body_of(r), "stopping");
}

// --host takes names, not only numbers; IPv6 addresses print in brackets.
TEST(HttpServerAddress, NamesResolveAndIpv6PrintsInBrackets) {
  auto make = [](const std::string& host) {
    HttpConfig config;
    config.host = host;
    config.port = 0;
    return std::make_unique<HttpServer>(config, [](HttpRequest, std::shared_ptr<Exchange>) {},
                                        [](int s, const std::string& m) { return HttpResponse{s, "text/plain", m, {}}; });
  };
  const auto named = make("localhost");
  const std::string url = named->url();
  EXPECT_TRUE(url == "http://127.0.0.1:" + std::to_string(named->port()) || url == "http://[::1]:" + std::to_string(named->port()))
      << url;
  std::unique_ptr<HttpServer> v6;
  try {
    v6 = make("::1");
  } catch (const Error& e) {
    GTEST_SKIP() << "no IPv6 loopback here: " << e.what();
  }
  EXPECT_EQ(v6->url(), "http://[::1]:" + std::to_string(v6->port()));
}

}  // namespace
}  // namespace llmserve::server
