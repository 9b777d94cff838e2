// The limits every HTTP request is read under, in one place: the server's sessions
// (http_server.cpp) and the HTTP fuzz target (fuzz/http_request_fuzz.cpp) read requests
// with exactly this configuration.
#pragma once

#include <cstddef>
#include <cstdint>

#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>

namespace rapide::serve {

inline constexpr uint32_t kHeaderLimit = 64 * 1024;
// Beast (1.74) applies neither header_limit nor body_limit to the trailer of a chunked body,
// and its field store throws std::length_error for a value of 64 KiB: the read buffer's
// capacity is what bounds trailers. Everything parsed from the buffer (the head, chunk
// headers, the trailer) must fit in it; body bytes pass through it into the body, bounded by
// --max-body. Below 64 KiB - 2, so no single field can reach Beast's throwing size.
inline constexpr size_t kReadBufferLimit = kHeaderLimit - 1024;

// Sets a fresh request parser's limits; the read buffer must be a
// beast::flat_buffer(kReadBufferLimit).
inline void limit_request_parser(
    boost::beast::http::request_parser<boost::beast::http::string_body>& parser,
    uint64_t max_body) {
  parser.body_limit(max_body);
  parser.header_limit(kHeaderLimit);
}

}  // namespace rapide::serve
