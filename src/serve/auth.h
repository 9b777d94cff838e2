// API keys: when any is configured, /v1/* requests need "Authorization: Bearer <key>"
// (scheme case-insensitive, RFC 7235).
// /health and /metrics stay open so load balancers and scrapers need no secret.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace rapide::serve {

class ApiKeys {
 public:
  ApiKeys() = default;
  // `keys` from --api-key (an empty or blank one throws Error(kInvalidArgument): it must
  // not quietly disable authentication); `key_file` (may be empty) holds one key per line, blank
  // lines and lines starting with '#' skipped. Throws Error(kNotFound) for an unreadable file and
  // kInvalidArgument for a file without keys.
  ApiKeys(std::vector<std::string> keys, const std::string& key_file);

  bool enabled() const { return !keys_.empty(); }
  // Whether the Authorization header value carries one of the keys. Compares in time
  // independent of where the strings differ, so timing does not leak a key's prefix.
  bool accepts(std::string_view authorization) const;

 private:
  std::vector<std::string> keys_;
};

}  // namespace rapide::serve
