#pragma once
// A raw TCP client for the server's tests: what HttpClient will not do
// (half-close, reset, HEAD, HTTP/1.0, idle sockets, a chosen source address).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

namespace llmserve::server {

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
  ~RawClient() {
    if (fd_ >= 0) close(fd_);
  }
  RawClient(const RawClient&) = delete;
  RawClient& operator=(const RawClient&) = delete;

  void send(const std::string& bytes) { ASSERT_EQ(::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL), ssize_t(bytes.size())); }
  void shut_write() { shutdown(fd_, SHUT_WR); }
  // Closes with a reset, as a client that goes away does (a plain close is
  // a half-close, which still gets its answer).
  void reset() {
    const linger now{1, 0};
    setsockopt(fd_, SOL_SOCKET, SO_LINGER, &now, sizeof now);
    close(fd_);
    fd_ = -1;
  }
  // The next bytes the server sends ("" when it closed).
  std::string read_some() {
    char buf[4096];
    const ssize_t n = recv(fd_, buf, sizeof buf, 0);
    return n > 0 ? std::string(buf, size_t(n)) : std::string();
  }
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

inline std::string raw_request(const std::string& path, const char* method = "GET", const char* version = "HTTP/1.1") {
  return std::string(method) + " " + path + " " + version + "\r\nHost: t\r\nConnection: close\r\n\r\n";
}

inline std::string body_of(const std::string& response) { return response.substr(response.find("\r\n\r\n") + 4); }

}  // namespace llmserve::server
