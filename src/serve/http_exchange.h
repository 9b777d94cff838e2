// One HTTP request/response as the handlers see it, independent of the socket code.
//
// Every method must be called on executor() (the connection's strand): handlers and engine
// events meet there, so a connection's state needs no lock.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <boost/asio/any_io_executor.hpp>

namespace rapide::serve {

using HeaderList = std::vector<std::pair<std::string, std::string>>;

class HttpExchange {
 public:
  virtual ~HttpExchange() = default;
  virtual boost::asio::any_io_executor executor() = 0;
  // The client's address and port ("127.0.0.1:41234"), for the request log.
  virtual std::string peer() const = 0;

  // Adds a header to this exchange's response, whichever way it is written (respond or
  // start_stream): CORS and X-Request-Id, decided before the handler runs.
  virtual void add_header(std::string name, std::string value) = 0;

  // A complete response; the connection then reads its next request (keep-alive).
  virtual void respond(int status, const std::string& content_type, std::string body,
                       const HeaderList& headers = {}) = 0;
  // A 200 response with a body of unknown length (chunked transfer encoding), written
  // piece by piece; pieces given while a write is in flight are coalesced.
  virtual void start_stream(const std::string& content_type) = 0;
  virtual void stream(std::string data) = 0;
  virtual void end_stream() = 0;

  // `callback` runs (once, on the strand) if the client disconnects before the response is
  // complete; then no more writes happen. Replaces any earlier callback; released when the
  // response completes.
  virtual void on_client_gone(std::function<void()> callback) = 0;
};

}  // namespace rapide::serve
