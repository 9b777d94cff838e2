// A fake OpenAI-style streaming server for tests: plain POSIX sockets on 127.0.0.1 with an
// ephemeral port, one thread per connection, and a handler that decides what each request
// gets (a token stream with known delays, an HTTP error, plain JSON, broken SSE).
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace rapide::loadgen::testing {

class FakeConnection {
 public:
  explicit FakeConnection(int fd) : fd_(fd) {}
  void send(const std::string& bytes) {
    size_t sent = 0;
    while (sent < bytes.size()) {
      const ssize_t n = ::send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) return;
      sent += static_cast<size_t>(n);
    }
  }
  // HTTP/1.1 chunked framing, so the client's chunk decoding is exercised too.
  void start_stream() {
    send(
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n"
        "Connection: close\r\n\r\n");
  }
  void chunk(const std::string& data) {
    char size[32];
    std::snprintf(size, sizeof(size), "%zx\r\n", data.size());
    send(size + data + "\r\n");
  }
  void end_stream() { send("0\r\n\r\n"); }
  void respond(int status, const std::string& type, const std::string& body) {
    send("HTTP/1.1 " + std::to_string(status) + " X\r\nContent-Type: " + type +
         "\r\nContent-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" +
         body);
  }

 private:
  int fd_;
};

class FakeServer {
 public:
  // handler(connection, request body) runs on the connection's own thread.
  using Handler = std::function<void(FakeConnection&, const std::string& body)>;

  explicit FakeServer(Handler handler) : handler_(std::move(handler)) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    ::listen(listen_fd_, 128);
    socklen_t len = sizeof(addr);
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    acceptor_ = std::thread([this] { accept_loop(); });
  }
  ~FakeServer() {
    stopping_ = true;
    ::shutdown(listen_fd_, SHUT_RDWR);
    ::close(listen_fd_);
    acceptor_.join();
    std::lock_guard<std::mutex> lock(mutex_);
    for (std::thread& t : connections_) t.join();
  }
  int port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  int requests() const { return requests_.load(); }
  std::vector<std::string> bodies() {
    std::lock_guard<std::mutex> lock(mutex_);
    return bodies_;
  }

 private:
  void accept_loop() {
    while (!stopping_) {
      const int fd = ::accept(listen_fd_, nullptr, nullptr);
      if (fd < 0) return;
      std::lock_guard<std::mutex> lock(mutex_);
      connections_.emplace_back([this, fd] { serve(fd); });
    }
  }

  void serve(int fd) {
    std::string data;
    char buf[4096];
    size_t header_end = std::string::npos;
    size_t need = 0;
    while (true) {
      const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
      if (n <= 0) break;
      data.append(buf, static_cast<size_t>(n));
      if (header_end == std::string::npos) {
        header_end = data.find("\r\n\r\n");
        if (header_end == std::string::npos) continue;
        const size_t cl = data.find("Content-Length: ");
        need = cl == std::string::npos ? 0 : std::stoul(data.substr(cl + 16));
      }
      if (data.size() >= header_end + 4 + need) break;
    }
    if (header_end != std::string::npos) {
      const std::string body = data.substr(header_end + 4);
      {
        std::lock_guard<std::mutex> lock(mutex_);
        bodies_.push_back(body);
      }
      ++requests_;
      FakeConnection connection(fd);
      handler_(connection, body);
    }
    ::shutdown(fd, SHUT_RDWR);
    ::close(fd);
  }

  Handler handler_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<int> requests_{0};
  std::thread acceptor_;
  std::mutex mutex_;
  std::vector<std::thread> connections_;
  std::vector<std::string> bodies_;
};

// The stream of a completions request: `tokens` chunks, the first after `first`, the rest
// every `gap`, then a usage chunk (when `usage`) and [DONE].
inline void stream_tokens(FakeConnection& c, std::chrono::milliseconds first,
                          std::chrono::milliseconds gap, int tokens, bool usage = true) {
  c.start_stream();
  std::this_thread::sleep_for(first);
  for (int i = 0; i < tokens; ++i) {
    if (i) std::this_thread::sleep_for(gap);
    c.chunk("data: {\"choices\":[{\"index\":0,\"text\":\"t" + std::to_string(i) +
            "\",\"finish_reason\":null}]}\n\n");
  }
  if (usage) {
    c.chunk("data: {\"choices\":[],\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":" +
            std::to_string(tokens) + ",\"total_tokens\":" + std::to_string(tokens + 7) + "}}\n\n");
  }
  c.chunk("data: [DONE]\n\n");
  c.end_stream();
}

}  // namespace rapide::loadgen::testing
