#include "serve/cors.h"

#include <algorithm>

namespace rapide::serve {

CorsPolicy::CorsPolicy(std::vector<std::string> origins) : origins_(std::move(origins)) {
  any_ = std::find(origins_.begin(), origins_.end(), "*") != origins_.end();
}

bool CorsPolicy::allows(std::string_view origin) const {
  if (origin.empty() || !enabled()) return false;
  return any_ || std::find(origins_.begin(), origins_.end(), origin) != origins_.end();
}

HeaderList CorsPolicy::response_headers(std::string_view origin) const {
  if (!allows(origin)) return {};
  // The origin itself rather than "*", so a credentialed request works too; Vary tells
  // caches the answer depends on it.
  return {{"Access-Control-Allow-Origin", std::string(origin)}, {"Vary", "Origin"}};
}

HeaderList CorsPolicy::preflight_headers(std::string_view origin) const {
  HeaderList headers = response_headers(origin);
  if (headers.empty()) return headers;
  headers.emplace_back("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
  headers.emplace_back("Access-Control-Allow-Headers", "Authorization, Content-Type, X-Request-Id");
  headers.emplace_back("Access-Control-Max-Age", "600");
  return headers;
}

}  // namespace rapide::serve
