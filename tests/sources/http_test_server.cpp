#include "http_test_server.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <sstream>
#include <stdexcept>

#include <mme/sdk/text.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

namespace mme::test {

namespace {

std::string reason(int status) {
  switch (status) {
    case 200: return "OK";
    case 301: return "Moved Permanently";
    case 302: return "Found";
    case 307: return "Temporary Redirect";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    default: return "Status";
  }
}

int listen_local(int& port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::runtime_error("socket failed");
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(fd, 16) != 0) {
    ::close(fd);
    throw std::runtime_error("bind/listen on 127.0.0.1 failed");
  }
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  port = ntohs(addr.sin_port);
  return fd;
}

}  // namespace

void HttpConnection::send(std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
}

void HttpConnection::hold_open() {
  char buf[4096];
  while (!stopping_) {
    pollfd p{fd_, POLLIN, 0};
    const int r = ::poll(&p, 1, 20);
    if (r < 0 && errno != EINTR) return;
    if (r > 0) {
      const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) return;  // the client gave up
    }
  }
}

std::string http_response(int status, std::string_view body,
                          const std::vector<std::pair<std::string, std::string>>& headers) {
  std::ostringstream out;
  out << "HTTP/1.1 " << status << ' ' << reason(status) << "\r\n";
  for (const auto& [k, v] : headers) out << k << ": " << v << "\r\n";
  out << "Content-Length: " << body.size() << "\r\nConnection: close\r\n\r\n" << body;
  return out.str();
}

HttpTestServer::HttpTestServer(Handler handler) : handler_(std::move(handler)) {
  listen_fd_ = listen_local(port_);
  thread_ = std::thread([this] { serve(); });
}

HttpTestServer::~HttpTestServer() { stop(); }

std::string HttpTestServer::url(const std::string& host) const {
  return "http://" + host + ":" + std::to_string(port_);
}

std::vector<HttpRequest> HttpTestServer::requests() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return requests_;
}

void HttpTestServer::stop() {
  stopping_ = true;
  if (thread_.joinable()) thread_.join();
  if (listen_fd_ >= 0) {
    ::close(listen_fd_);
    listen_fd_ = -1;
  }
}

void HttpTestServer::serve() {
  while (!stopping_) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (::poll(&p, 1, 20) <= 0) continue;
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    handle(fd);
    ::shutdown(fd, SHUT_RDWR);
    ::close(fd);
  }
}

void HttpTestServer::handle(int fd) {
  // Read the request head (a GET has no body), for at most two seconds.
  std::string head;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  char buf[4096];
  while (head.find("\r\n\r\n") == std::string::npos && !stopping_ && std::chrono::steady_clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    const int r = ::poll(&p, 1, 20);
    if (r < 0 && errno != EINTR) return;
    if (r <= 0) continue;
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return;
    head.append(buf, static_cast<std::size_t>(n));
    if (static_cast<unsigned char>(head[0]) == 0x16) {  // a TLS ClientHello: this server speaks plain HTTP
      std::lock_guard<std::mutex> lock(mutex_);
      requests_.push_back(HttpRequest{"TLS", "", {}, ""});
      return;
    }
  }
  const auto end = head.find("\r\n\r\n");
  if (end == std::string::npos) return;
  head.resize(end);
  HttpRequest req;
  req.raw = head;
  std::istringstream in(head);
  std::string line;
  std::getline(in, line);
  std::istringstream request_line(trim(line));
  request_line >> req.method >> req.target;
  while (std::getline(in, line)) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string name = line.substr(0, colon);
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
    req.headers[name] = trim(line.substr(colon + 1));
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    requests_.push_back(req);
  }
  HttpConnection conn(fd, stopping_);
  handler_(conn, req);
}

int unused_local_port() {
  int port = 0;
  const int fd = listen_local(port);
  ::close(fd);
  return port;
}

}  // namespace mme::test
