// Beast/Asio implementation of http_server.h. One strand per connection;
// every handler of a connection runs on it, so a connection's state needs
// no lock. Response bytes are framed here (status line, headers, chunked
// encoding): Beast parses requests, we write plain byte queues.
#include "server/http_server.h"

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <algorithm>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>

#include <spdlog/spdlog.h>

#include "core/error.h"

namespace llmserve::server {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

std::string_view HttpRequest::path() const {
  const std::string_view t = target;
  return t.substr(0, t.find('?'));
}

const std::string* HttpRequest::header(std::string_view lower_name) const {
  for (const auto& [k, v] : headers)
    if (k == lower_name) return &v;
  return nullptr;
}

namespace {

constexpr size_t kWatchChunk = 4096;
constexpr size_t kMaxPipelinedBytes = 64 << 10;   // read ahead while a response is pending
constexpr size_t kMaxDrainBytes = 16 << 20;       // discarded at a graceful close
constexpr auto kDrainTime = std::chrono::seconds(2);

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string status_line(int status) {
  const auto reason = http::obsolete_reason(static_cast<http::status>(status));
  return "HTTP/1.1 " + std::to_string(status) + " " + std::string(reason.data(), reason.size()) + "\r\n";
}

std::string header_block(int status, const std::string& content_type, const Headers& extra, bool keep_alive) {
  std::string h = status_line(status);
  if (!content_type.empty()) h += "Content-Type: " + content_type + "\r\n";
  for (const auto& [k, v] : extra) h += k + ": " + v + "\r\n";
  h += keep_alive ? "Connection: keep-alive\r\n" : "Connection: close\r\n";
  return h;
}

}  // namespace

namespace {
class Connection;

// What a new connection was let in as (see HttpConfig's caps).
enum class Slot { None, Normal, Reserve };
}  // namespace

struct HttpServer::Impl {
  Impl(HttpConfig c, Handler h, ErrorPage e)
      : config(std::move(c)), handler(std::move(h)), error_page(std::move(e)), acceptor(asio::make_strand(ioc)) {}

  struct Admission {
    Slot slot;
    int status;  // when refused (slot None): the answer
    std::string message;
  };

  void accept();
  void track(const std::shared_ptr<Connection>& c);
  Admission admit(const std::string& address);
  void release(const std::string& address, Slot slot);
  bool reserved_path(std::string_view path) const {
    return std::find(config.reserved_paths.begin(), config.reserved_paths.end(), path) != config.reserved_paths.end();
  }

  HttpConfig config;
  Handler handler;
  ErrorPage error_page;
  // Before ioc: connections still queued in ioc's handlers count themselves
  // out when ioc is destroyed.
  std::atomic<int> connections{0};
  std::atomic<int> exchanges{0};  // requests read and not yet answered in full
  std::mutex slots_mu;
  int normal_slots = 0, reserve_slots = 0;
  std::unordered_map<std::string, int> per_client;  // connections holding a slot, per peer address
  std::atomic<bool> accepting{true};
  std::mutex live_mu;
  std::vector<std::weak_ptr<Connection>> live;  // for stop(): every connection, to close
  asio::io_context ioc;
  tcp::acceptor acceptor;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work;
  std::vector<std::thread> threads;
};

namespace {

class ExchangeImpl;

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(HttpServer::Impl& srv, tcp::socket sock, std::string address, Slot slot)
      : srv_(srv), sock_(std::move(sock)), read_timer_(sock_.get_executor()), write_timer_(sock_.get_executor()),
        address_(std::move(address)), slot_(slot) {
    ++srv_.connections;
    boost::system::error_code ec;
    const auto ep = sock_.remote_endpoint(ec);
    if (!ec) remote_ = address_ + ":" + std::to_string(ep.port());
  }
  ~Connection() {
    srv_.release(address_, slot_);
    --srv_.connections;
  }

  void start() { read_header(); }
  // Server shutdown (no I/O thread runs any more): drop the connection and
  // end its exchange, which breaks the connection <-> exchange references.
  void close_now() { fail(); }

  // Answers at once and closes: a connection cap was reached.
  void refuse(int status, const std::string& message) {
    HttpResponse r = srv_.error_page(status, message);
    r.headers.emplace_back("Retry-After", "1");
    queue_response(std::move(r), false);
  }
  // The server stops: the pending exchange, if any, is asked to end.
  void server_stopping();

  // --- used by ExchangeImpl (on the strand) ---
  void respond(HttpResponse r) { queue_response(std::move(r), keep_alive_); }
  void begin_stream(int status, const std::string& type, const Headers& headers) {
    // HTTP/1.0 has no chunked encoding: there the body ends when the connection closes.
    chunked_ = !http10_;
    if (!chunked_) keep_alive_ = false;
    std::string h = header_block(status, type, headers, keep_alive_);
    h += chunked_ ? "Cache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n\r\n" : "Cache-Control: no-cache\r\n\r\n";
    queue(std::move(h));
  }
  void write_chunk(std::string_view data) {
    if (data.empty() || head_) return;  // an empty chunk would end the body
    if (!chunked_) return queue(std::string(data));
    char size[20];
    const int n = std::snprintf(size, sizeof size, "%zx\r\n", data.size());
    std::string c(size, static_cast<size_t>(n));
    c.append(data);
    c += "\r\n";
    queue(std::move(c));
  }
  void end_stream() {
    if (chunked_ && !head_) queue("0\r\n\r\n");
    response_complete_ = true;
    maybe_finish();
  }
  bool closed() const { return closed_; }
  asio::any_io_executor executor() { return sock_.get_executor(); }
  const std::string& remote() const { return remote_; }

 private:
  friend class ExchangeImpl;

  void queue_response(HttpResponse r, bool keep_alive) {
    keep_alive_ = keep_alive;
    std::string out = header_block(r.status, r.content_type, r.headers, keep_alive);
    out += "Content-Length: " + std::to_string(r.body.size()) + "\r\n\r\n";
    if (!head_) out += r.body;
    queue(std::move(out));
    response_complete_ = true;
    maybe_finish();
  }

  void arm(asio::steady_timer& t, std::chrono::milliseconds d) {
    t.expires_after(d);
    t.async_wait([self = shared_from_this()](boost::system::error_code ec) {
      if (!ec) self->fail();  // deadline passed: drop the connection
    });
  }

  void read_header() {
    if (closed_) return;
    // After the client's EOF no request can follow what is buffered, and a
    // read would never end (asio waits for a readiness edge the EOF used up;
    // a partial request buffered before the EOF waits out header_timeout).
    if (peer_eof_ && buf_.size() == 0) return fail();
    parser_.emplace();
    parser_->header_limit(static_cast<uint32_t>(srv_.config.max_header_bytes));
    parser_->body_limit(srv_.config.max_body_bytes);
    arm(read_timer_, srv_.config.header_timeout);
    http::async_read_header(sock_, buf_, *parser_, [self = shared_from_this()](beast::error_code ec, size_t) {
      self->on_header(ec);
    });
  }

  void on_header(beast::error_code ec) {
    if (ec) return read_failed(ec);
    read_timer_.cancel();
    arm(read_timer_, srv_.config.body_timeout);
    const auto& req = parser_->get();
    const auto expect = req[http::field::expect];
    if (!parser_->is_done() && beast::iequals(expect, "100-continue")) queue("HTTP/1.1 100 Continue\r\n\r\n");
    if (parser_->is_done()) return on_body({});
    http::async_read(sock_, buf_, *parser_, [self = shared_from_this()](beast::error_code e, size_t) {
      self->on_body(e);
    });
  }

  void read_failed(beast::error_code ec) {
    read_timer_.cancel();
    if (ec == http::error::body_limit) {
      reject_request(413, "request body exceeds " + std::to_string(srv_.config.max_body_bytes) + " bytes");
    } else if (ec == http::error::header_limit) {
      reject_request(431, "request headers exceed " + std::to_string(srv_.config.max_header_bytes) + " bytes");
    } else if (ec == http::error::end_of_stream || ec == asio::error::eof || ec == asio::error::operation_aborted ||
               ec == asio::error::connection_reset || closed_ || buf_.size() == 0) {
      fail();  // idle close, timeout, reset: nothing to answer
    } else {
      reject_request(400, "malformed HTTP request: " + ec.message());
    }
  }

  void reject_request(int status, const std::string& message) { queue_response(srv_.error_page(status, message), false); }
  bool refused_by_reserve(std::string_view path);

  void on_body(beast::error_code ec);

  void watch() {
    if (closed_ || watching_ || peer_eof_ || buf_.size() >= kMaxPipelinedBytes) return;
    watching_ = true;
    sock_.async_read_some(buf_.prepare(kWatchChunk), [self = shared_from_this()](beast::error_code ec, size_t n) {
      self->on_watch(ec, n);
    });
  }

  void on_watch(beast::error_code ec, size_t n) {
    watching_ = false;
    if (!ec) {
      buf_.commit(n);
      if (exchange_) watch();
      else if (resume_read_) resume();
      return;
    }
    if (ec == asio::error::operation_aborted && resume_read_ && !closed_) return resume();
    if (ec == asio::error::eof && !closed_) {
      // A half-close: the client sends no more but may still read. Only a
      // reset or a failed write says it is gone.
      peer_eof_ = true;
      if (exchange_) return;
      if (resume_read_) return resume();
    }
    fail();  // a reset, or the end of a graceful close
  }

  void resume() {
    resume_read_ = false;
    read_header();
  }

  void queue(std::string bytes) {
    if (closed_) return;
    pending_bytes_ += bytes.size();
    if (pending_bytes_ > srv_.config.max_pending_write_bytes) return fail();  // a reader too slow to keep
    out_.push_back(std::move(bytes));
    flush();
  }

  void flush() {
    if (writing_ || out_.empty() || closed_) return;
    writing_ = true;
    wire_.clear();
    while (!out_.empty()) {
      wire_ += out_.front();
      out_.pop_front();
    }
    arm(write_timer_, srv_.config.write_timeout);
    asio::async_write(sock_, asio::buffer(wire_), [self = shared_from_this()](beast::error_code ec, size_t n) {
      self->on_write(ec, n);
    });
  }

  void on_write(beast::error_code ec, size_t n) {
    writing_ = false;
    write_timer_.cancel();
    pending_bytes_ -= std::min(pending_bytes_, n);
    if (ec) return fail();
    if (!out_.empty()) return flush();
    maybe_finish();
  }

  // The response is fully written: on to the next request, or close.
  void maybe_finish() {
    if (!response_complete_ || writing_ || !out_.empty() || closed_) return;
    response_complete_ = false;
    end_exchange(false);
    if (!keep_alive_ || !srv_.accepting) return graceful_close();
    if (watching_) {
      resume_read_ = true;
      boost::system::error_code ignored;
      sock_.cancel(ignored);  // ends the watch read; its handler resumes reading
    } else {
      read_header();
    }
  }

  // Half-closes and drains what the client still sends (e.g. a body we
  // refused), so the kernel does not reset the connection before the client
  // has read our answer.
  void graceful_close() {
    if (peer_eof_) return fail();  // nothing left to drain
    boost::system::error_code ignored;
    sock_.shutdown(tcp::socket::shutdown_send, ignored);
    read_timer_.cancel();
    arm(read_timer_, std::chrono::duration_cast<std::chrono::milliseconds>(kDrainTime));
    if (watching_) return;  // its completion (EOF) closes
    drain();
  }

  void drain() {
    buf_.consume(buf_.size());
    sock_.async_read_some(buf_.prepare(kWatchChunk), [self = shared_from_this()](beast::error_code ec, size_t n) {
      self->drained_ += n;
      if (ec || self->drained_ > kMaxDrainBytes) return self->fail();
      self->drain();
    });
  }

  void end_exchange(bool client_gone);

  void fail() {
    if (closed_) return;
    closed_ = true;
    boost::system::error_code ignored;
    read_timer_.cancel();
    write_timer_.cancel();
    sock_.shutdown(tcp::socket::shutdown_both, ignored);
    sock_.close(ignored);
    out_.clear();
    end_exchange(true);
  }

  HttpServer::Impl& srv_;
  tcp::socket sock_;
  asio::steady_timer read_timer_, write_timer_;
  beast::flat_buffer buf_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::shared_ptr<ExchangeImpl> exchange_;
  std::deque<std::string> out_;
  std::string wire_;
  std::string address_;  // the peer's, for the per-client cap
  std::string remote_;   // address:port, for logs
  Slot slot_;
  size_t pending_bytes_ = 0, drained_ = 0;
  bool writing_ = false, watching_ = false, resume_read_ = false, peer_eof_ = false;
  bool response_complete_ = false, keep_alive_ = true, closed_ = false;
  bool head_ = false, http10_ = false, chunked_ = true;  // the current request's
};

class ExchangeImpl : public Exchange {
 public:
  explicit ExchangeImpl(std::shared_ptr<Connection> conn)
      : conn_(std::move(conn)), executor_(conn_->executor()), timer_(executor_) {}

  void respond(HttpResponse r) override {
    responding_ = true;
    if (live()) conn_->respond(std::move(r));
  }
  void begin_stream(int status, std::string type, Headers headers) override {
    responding_ = true;
    if (live()) conn_->begin_stream(status, type, headers);
  }
  void write(std::string_view data) override {
    if (live()) conn_->write_chunk(data);
  }
  void end_stream() override {
    if (live()) conn_->end_stream();
  }
  void on_close(std::function<void()> fn) override {
    if (conn_) on_close_ = std::move(fn);
    else if (gone_) fn();  // the client left before the handler got this far
  }
  void on_server_stop(std::function<void()> fn) override {
    if (conn_) on_stop_ = std::move(fn);
  }
  bool answered() const override { return responding_ || !live(); }
  void post(std::function<void()> fn) override { asio::post(executor_, std::move(fn)); }
  void after(std::chrono::milliseconds delay, std::function<void()> fn) override {
    // An expired timer's handler may be queued already: the epoch tells it
    // that a later call replaced it.
    const uint64_t epoch = ++*timer_epoch_;
    timer_.expires_after(delay);
    timer_.async_wait([fn = std::move(fn), epoch, current = timer_epoch_](boost::system::error_code ec) {
      if (!ec && *current == epoch) fn();
    });
  }

  // The connection is done with this exchange; breaks the reference cycles.
  void end(bool client_gone) {
    if (!conn_) return;
    gone_ = client_gone;
    ++*timer_epoch_;
    timer_.cancel();
    conn_.reset();
    on_stop_ = nullptr;
    auto fn = std::move(on_close_);
    on_close_ = nullptr;
    if (client_gone && fn) fn();
  }

  void server_stopping() {
    auto fn = std::move(on_stop_);
    on_stop_ = nullptr;
    if (fn) fn();
  }

 private:
  bool live() const { return conn_ && !conn_->closed(); }

  std::shared_ptr<Connection> conn_;
  asio::any_io_executor executor_;
  asio::steady_timer timer_;
  std::shared_ptr<uint64_t> timer_epoch_ = std::make_shared<uint64_t>(0);
  std::function<void()> on_close_, on_stop_;
  bool gone_ = false, responding_ = false;
};

void Connection::on_body(beast::error_code ec) {
  if (ec) return read_failed(ec);
  read_timer_.cancel();
  auto msg = parser_->release();
  parser_.reset();
  keep_alive_ = msg.keep_alive();
  head_ = msg.method() == http::verb::head;
  http10_ = msg.version() < 11;
  if (refused_by_reserve(std::string_view(msg.target().data(), msg.target().size()))) return;
  HttpRequest req;
  req.method = std::string(msg.method_string());
  req.target = std::string(msg.target());
  for (const auto& f : msg) req.headers.emplace_back(lower(f.name_string()), std::string(f.value()));
  req.body = std::move(msg.body());
  req.remote = remote_;
  exchange_ = std::make_shared<ExchangeImpl>(shared_from_this());
  ++srv_.exchanges;
  watch();
  srv_.handler(std::move(req), exchange_);
}

// A connection beyond max_connections serves the reserved paths only.
bool Connection::refused_by_reserve(std::string_view target) {
  if (slot_ != Slot::Reserve || srv_.reserved_path(target.substr(0, target.find('?')))) return false;
  refuse(503, "too many open connections; retry later");
  return true;
}

void Connection::server_stopping() {
  if (exchange_) exchange_->server_stopping();
}

void Connection::end_exchange(bool client_gone) {
  if (!exchange_) return;
  auto ex = std::move(exchange_);
  exchange_.reset();
  --srv_.exchanges;
  ex->end(client_gone);
}

}  // namespace

void HttpServer::Impl::accept() {
  acceptor.async_accept(asio::make_strand(ioc), [this](beast::error_code ec, tcp::socket sock) {
    if (ec) {
      if (ec == asio::error::operation_aborted || !acceptor.is_open()) return;
      // Out of descriptors and the like: try again shortly rather than spin.
      auto t = std::make_shared<asio::steady_timer>(acceptor.get_executor(), std::chrono::milliseconds(10));
      t->async_wait([this, t](boost::system::error_code) {
        if (acceptor.is_open()) accept();
      });
      return;
    }
    sock.set_option(tcp::no_delay(true), ec);
    const auto peer = sock.remote_endpoint(ec);
    if (ec || connections.load() >= 2 * config.max_connections + config.reserved_connections) {
      sock.close(ec);  // gone already, or far past the caps: not even an answer
    } else {
      const std::string address = peer.address().to_string();
      Admission a = admit(address);
      auto conn = std::make_shared<Connection>(*this, std::move(sock), address, a.slot);
      track(conn);
      if (a.slot == Slot::None) {
        asio::post(conn->executor(), [conn, a = std::move(a)] { conn->refuse(a.status, a.message); });
      } else {
        asio::post(conn->executor(), [conn] { conn->start(); });
      }
    }
    accept();
  });
}

void HttpServer::Impl::track(const std::shared_ptr<Connection>& c) {
  std::lock_guard lock(live_mu);
  if (live.size() >= 64 && live.size() >= 2 * static_cast<size_t>(connections.load()))
    std::erase_if(live, [](const std::weak_ptr<Connection>& w) { return w.expired(); });
  live.push_back(c);
}

HttpServer::Impl::Admission HttpServer::Impl::admit(const std::string& address) {
  std::lock_guard lock(slots_mu);
  const auto it = per_client.find(address);
  const int mine = it == per_client.end() ? 0 : it->second;
  if (mine >= config.max_connections_per_client)
    return {Slot::None, 429,
            "too many open connections from " + address + " (at most " + std::to_string(config.max_connections_per_client) +
                "); retry later"};
  Slot slot = Slot::None;
  if (normal_slots < config.max_connections) {
    ++normal_slots;
    slot = Slot::Normal;
  } else if (reserve_slots < config.reserved_connections) {
    ++reserve_slots;
    slot = Slot::Reserve;
  } else {
    return {Slot::None, 503, "too many open connections; retry later"};
  }
  ++per_client[address];
  return {slot, 0, {}};
}

void HttpServer::Impl::release(const std::string& address, Slot slot) {
  if (slot == Slot::None) return;
  std::lock_guard lock(slots_mu);
  --(slot == Slot::Normal ? normal_slots : reserve_slots);
  if (--per_client[address] == 0) per_client.erase(address);
}

namespace {

// Listens on the first address `host` resolves to that takes the port.
void listen_on(tcp::acceptor& acceptor, asio::io_context& ioc, const std::string& host, uint16_t port) {
  beast::error_code ec;
  tcp::resolver resolver(ioc);
  const auto results = resolver.resolve(host, std::to_string(port), tcp::resolver::numeric_service, ec);
  if (ec) throw Error("--host " + host + ": cannot resolve it (" + ec.message() + ")");
  for (const auto& entry : results) {
    const tcp::endpoint ep = entry.endpoint();
    acceptor.open(ep.protocol(), ec);
    if (!ec) acceptor.set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec) acceptor.bind(ep, ec);
    if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
    if (!ec) return;
    beast::error_code ignored;
    acceptor.close(ignored);
  }
  throw Error("cannot listen on " + host + ":" + std::to_string(port) + ": " + ec.message());
}

}  // namespace

HttpServer::HttpServer(HttpConfig config, Handler handler, ErrorPage error_page)
    : impl_(std::make_unique<Impl>(std::move(config), std::move(handler), std::move(error_page))) {
  Impl& s = *impl_;
  if (s.config.threads < 1) throw Error("HTTP threads must be >= 1");
  if (s.config.max_connections < 1 || s.config.max_connections_per_client < 1 || s.config.reserved_connections < 0)
    throw Error("the connection caps must be >= 1 (the reserve >= 0)");
  listen_on(s.acceptor, s.ioc, s.config.host, s.config.port);
}

HttpServer::~HttpServer() { stop(); }

uint16_t HttpServer::port() const {
  beast::error_code ec;
  const auto ep = impl_->acceptor.local_endpoint(ec);
  return ec ? impl_->config.port : ep.port();
}

std::string HttpServer::url() const {
  beast::error_code ec;
  const auto ep = impl_->acceptor.local_endpoint(ec);
  if (ec) return "http://" + impl_->config.host + ":" + std::to_string(impl_->config.port);
  const std::string address = ep.address().to_string();
  return "http://" + (ep.address().is_v6() ? "[" + address + "]" : address) + ":" + std::to_string(ep.port());
}

void HttpServer::start() {
  Impl& s = *impl_;
  s.work.emplace(s.ioc.get_executor());
  s.accept();
  // A handler that throws must not end the process: the exception is logged
  // and the thread serves on (that request's timeout or its client ends it).
  for (int i = 0; i < s.config.threads; ++i)
    s.threads.emplace_back([&s] {
      for (;;) {
        try {
          s.ioc.run();
          return;
        } catch (const std::exception& e) {
          spdlog::error("HTTP: a handler failed: {}", e.what());
        }
      }
    });
}

void HttpServer::stop_accepting() {
  Impl& s = *impl_;
  s.accepting = false;
  asio::post(s.acceptor.get_executor(), [&s] {
    beast::error_code ec;
    s.acceptor.close(ec);
  });
}

void HttpServer::end_exchanges() {
  Impl& s = *impl_;
  std::lock_guard lock(s.live_mu);
  for (const auto& w : s.live)
    if (auto c = w.lock()) asio::post(c->executor(), [c] { c->server_stopping(); });
}

void HttpServer::stop() {
  Impl& s = *impl_;
  if (s.threads.empty()) return;
  s.work.reset();
  s.ioc.stop();
  for (auto& t : s.threads) t.join();
  s.threads.clear();
  std::vector<std::shared_ptr<Connection>> open;
  {
    std::lock_guard lock(s.live_mu);
    for (const auto& w : s.live)
      if (auto c = w.lock()) open.push_back(std::move(c));
    s.live.clear();
  }
  for (const auto& c : open) c->close_now();
}

int HttpServer::open_connections() const { return impl_->connections.load(); }
int HttpServer::active_exchanges() const { return impl_->exchanges.load(); }

}  // namespace llmserve::server
