// A tiny HTTP/1.1 server for the download tests: one thread, a listening socket on
// 127.0.0.1 with an ephemeral port, one request per connection ("Connection: close").
// The test decides every byte of each response, so it can also misbehave on purpose:
// stall after the headers, close before the announced Content-Length, send too much.
// A TLS ClientHello is recorded as a request with method "TLS" and the connection closed.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

namespace mme::test {

struct HttpRequest {
  std::string method;
  std::string target;                          // e.g. /org/name/resolve/main/config.json
  std::map<std::string, std::string> headers;  // names lower-cased, values trimmed
  std::string raw;                             // the request head as received

  bool has(const std::string& name) const { return headers.count(name) != 0; }
  std::string get(const std::string& name) const {
    auto it = headers.find(name);
    return it == headers.end() ? std::string() : it->second;
  }
};

class HttpConnection {
 public:
  HttpConnection(int fd, const std::atomic<bool>& stopping) : fd_(fd), stopping_(stopping) {}
  // Sends all bytes (ignores a peer that has gone away).
  void send(std::string_view bytes);
  // Keeps the connection open, sending nothing, until the client closes it or the server stops.
  void hold_open();

 private:
  int fd_;
  const std::atomic<bool>& stopping_;
};

// A complete response with Content-Length and "Connection: close".
std::string http_response(int status, std::string_view body,
                          const std::vector<std::pair<std::string, std::string>>& headers = {});

class HttpTestServer {
 public:
  using Handler = std::function<void(HttpConnection&, const HttpRequest&)>;

  explicit HttpTestServer(Handler handler);
  ~HttpTestServer();
  HttpTestServer(const HttpTestServer&) = delete;
  HttpTestServer& operator=(const HttpTestServer&) = delete;

  int port() const { return port_; }
  // http://<host>:<port>
  std::string url(const std::string& host = "127.0.0.1") const;
  std::vector<HttpRequest> requests() const;
  // Stops accepting, ends a held connection, joins the thread, closes the socket. Idempotent.
  void stop();

 private:
  void serve();
  void handle(int fd);

  Handler handler_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  mutable std::mutex mutex_;
  std::vector<HttpRequest> requests_;
  std::thread thread_;
};

// A port on 127.0.0.1 where nothing listens (bound, read, closed).
int unused_local_port();

}  // namespace mme::test
