#include "server/http_client.h"

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "core/error.h"

namespace llmserve::server {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

Url parse_url(const std::string& url) {
  constexpr std::string_view scheme = "http://";
  if (!url.starts_with(scheme)) throw Error("URL " + url + ": only http://HOST[:PORT] is supported");
  std::string rest = url.substr(scheme.size());
  Url u;
  const size_t slash = rest.find('/');
  if (slash != std::string::npos) {
    u.base_path = rest.substr(slash);
    rest.resize(slash);
    while (u.base_path.ends_with('/')) u.base_path.pop_back();
  }
  std::string port;
  if (rest.starts_with("[")) {  // [IPv6]:PORT
    const size_t close = rest.find(']');
    if (close == std::string::npos) throw Error("URL " + url + ": unclosed '['");
    if (close + 1 < rest.size()) {
      if (rest[close + 1] != ':') throw Error("URL " + url + ": expected ':' after ']'");
      port = rest.substr(close + 2);
    }
    rest = rest.substr(1, close - 1);
  } else if (const size_t colon = rest.rfind(':'); colon != std::string::npos) {
    port = rest.substr(colon + 1);
    rest.resize(colon);
  }
  if (!port.empty() || rest.empty()) {
    char* end = nullptr;
    const long p = std::strtol(port.c_str(), &end, 10);
    if (port.empty() || *end || p < 1 || p > 65535) throw Error("URL " + url + ": bad port '" + port + "'");
    u.port = static_cast<uint16_t>(p);
  }
  if (rest.empty()) throw Error("URL " + url + ": no host");
  u.host = rest;
  return u;
}

struct HttpClient::Impl {
  Impl(std::string h, uint16_t p, std::chrono::milliseconds t) : host(std::move(h)), port(p), timeout(t), stream(ioc) {}

  void connect() {
    tcp::resolver resolver(ioc);
    const auto results = resolver.resolve(host, std::to_string(port));
    stream.expires_after(timeout);
    stream.connect(results);
    connected = true;
  }

  HttpResult once(const std::string& method, const std::string& target, const std::string& body, const Headers& headers,
                  const std::function<void(std::string_view)>& on_body) {
    if (!connected) connect();
    http::request<http::string_body> req{http::string_to_verb(method), target, 11};
    req.set(http::field::host, host + ":" + std::to_string(port));
    req.set(http::field::user_agent, "llmserve-bench");
    for (const auto& [k, v] : headers) req.set(k, v);
    if (!body.empty() || method == "POST") {
      req.set(http::field::content_type, "application/json");
      req.body() = body;
      req.prepare_payload();
    }
    stream.expires_after(timeout);
    http::write(stream, req);

    HttpResult r;
    http::response_parser<http::buffer_body> parser;
    parser.body_limit(boost::none);
    http::read_header(stream, buf, parser);
    r.status = static_cast<int>(parser.get().result_int());
    for (const auto& f : parser.get()) {
      std::string name(f.name_string());
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      r.headers.emplace_back(std::move(name), std::string(f.value()));
    }
    char chunk[16384];
    while (!parser.is_done()) {
      parser.get().body().data = chunk;
      parser.get().body().size = sizeof chunk;
      beast::error_code ec;
      // read_some, not read: the body must reach on_body as it arrives, not
      // once the buffer is full (that would hide time to first token).
      http::read_some(stream, buf, parser, ec);
      if (ec && ec != http::error::need_buffer) throw beast::system_error(ec);
      const size_t n = sizeof chunk - parser.get().body().size;
      if (n == 0) continue;
      if (on_body) on_body(std::string_view(chunk, n));
      else r.body.append(chunk, n);
    }
    if (!parser.get().keep_alive()) close();
    return r;
  }

  void close() {
    beast::error_code ec;
    stream.socket().shutdown(tcp::socket::shutdown_both, ec);
    stream.close();
    buf.clear();
    connected = false;
  }

  std::string host;
  uint16_t port;
  std::chrono::milliseconds timeout;
  asio::io_context ioc;
  beast::tcp_stream stream;
  beast::flat_buffer buf;
  bool connected = false;
};

HttpClient::HttpClient(std::string host, uint16_t port, std::chrono::milliseconds timeout)
    : impl_(std::make_unique<Impl>(std::move(host), port, timeout)) {}
HttpClient::~HttpClient() = default;

HttpResult HttpClient::request(const std::string& method, const std::string& target, const std::string& body,
                               const Headers& headers, const std::function<void(std::string_view)>& on_body) {
  // A kept-alive connection the server has since closed fails on first use:
  // one retry on a fresh connection, but only if nothing was received.
  for (int attempt = 0;; ++attempt) {
    const bool reused = impl_->connected;
    bool received = false;
    auto tracking = on_body ? std::function<void(std::string_view)>([&](std::string_view d) {
      received = true;
      on_body(d);
    })
                            : std::function<void(std::string_view)>();
    try {
      return impl_->once(method, target, body, headers, tracking);
    } catch (const std::exception& e) {
      impl_->close();
      if (reused && !received && attempt == 0) continue;
      HttpResult r;
      r.error = e.what();
      return r;
    }
  }
}

void HttpClient::close() { impl_->close(); }

}  // namespace llmserve::server
