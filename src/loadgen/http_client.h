// An asynchronous HTTP/1.1 client (Boost.Beast) that POSTs one request and times the SSE
// stream that comes back, chunk by chunk, into a RequestRecord.
//
// Everything runs on the caller's io_context thread, so thousands of streams in flight cost
// no threads and each chunk is stamped the moment it is read. Every failure (refused
// connection, HTTP status, a JSON answer instead of a stream, a malformed chunk, a timeout,
// a reset) ends the request with an ErrorKind instead of an exception, so a run always
// completes and says what failed.
#pragma once

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <functional>
#include <optional>
#include <string>

#include "base/clock.h"
#include "loadgen/request_record.h"

namespace rapide::loadgen {

// Where the server is: parsed from "http://host:port[/prefix]".
struct HttpTarget {
  std::string host;
  std::string port = "80";
  std::string prefix;  // prepended to every request path, no trailing '/'
};
// Throws Error(kInvalidArgument) for anything but an http:// URL (https is not supported).
HttpTarget parse_url(const std::string& url);

struct HttpPost {
  std::string path;     // e.g. "/v1/completions" (the target's prefix is added)
  std::string body;     // JSON
  std::string api_key;  // sent as "Authorization: Bearer KEY" when not empty
  std::chrono::milliseconds timeout{std::chrono::minutes(10)};  // whole request
  // Called with each content chunk's text as it arrives (`rapide chat --url` prints it).
  std::function<void(const std::string&)> on_text;
};

// Starts the request; `done` runs on the io_context thread with `record` filled in (token
// times, end time, counts, error). `start` is the send time the record's times are relative to.
void post_streaming(boost::asio::io_context& io, const HttpTarget& target, HttpPost post,
                    TimePoint start, RequestRecord record, RecordHandler done);

struct HttpReply {
  int status = 0;
  std::string body;
};
// A blocking GET on its own io_context (for the pre-flight /v1/models); nullopt when the
// server cannot be reached or does not answer within `timeout`.
std::optional<HttpReply> http_get(const HttpTarget& target, const std::string& path,
                                  const std::string& api_key, std::chrono::milliseconds timeout);

}  // namespace rapide::loadgen
