// Cross-origin resource sharing for browser clients: off unless --allowed-origins names the
// origins (or "*") whose pages may call the API. A request from an allowed origin gets
// Access-Control-Allow-Origin on its response; an OPTIONS preflight from one is answered
// 204 with the methods and headers the API accepts. Origins not listed get no CORS headers,
// so the browser keeps its same-origin rule.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "serve/http_exchange.h"

namespace rapide::serve {

class CorsPolicy {
 public:
  CorsPolicy() = default;
  // Entries are exact origins ("https://app.example.com") or "*".
  explicit CorsPolicy(std::vector<std::string> origins);

  bool enabled() const { return !origins_.empty(); }
  bool allows(std::string_view origin) const;
  // The headers an allowed origin's response carries (empty for others).
  HeaderList response_headers(std::string_view origin) const;
  // The headers of a 204 answer to an allowed origin's preflight.
  HeaderList preflight_headers(std::string_view origin) const;

 private:
  std::vector<std::string> origins_;
  bool any_ = false;
};

}  // namespace rapide::serve
