#include "serve/auth.h"

#include <cctype>
#include <fstream>

#include "base/error.h"

namespace rapide::serve {

namespace {

std::string trim(std::string s) {
  const char* space = " \t\r\n";
  const size_t first = s.find_first_not_of(space);
  if (first == std::string::npos) return {};
  return s.substr(first, s.find_last_not_of(space) - first + 1);
}

bool constant_time_equal(std::string_view a, std::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  const size_t n = std::max(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned char>(x ^ y);
  }
  return diff == 0;
}

}  // namespace

ApiKeys::ApiKeys(std::vector<std::string> keys, const std::string& key_file) {
  for (std::string& k : keys) {
    k = trim(std::move(k));
    // `--api-key "$UNSET"` would otherwise leave the server open while its operator
    // believes it is protected.
    if (k.empty())
      fail(ErrorCode::kInvalidArgument,
           "--api-key is empty; pass a non-empty key, or no --api-key to serve without one");
    keys_.push_back(std::move(k));
  }
  if (key_file.empty()) return;
  std::ifstream in(key_file);
  if (!in) fail(ErrorCode::kNotFound, "--api-key-file '{}' cannot be read", key_file);
  size_t from_file = 0;
  for (std::string line; std::getline(in, line);) {
    line = trim(std::move(line));
    if (line.empty() || line[0] == '#') continue;
    keys_.push_back(std::move(line));
    ++from_file;
  }
  if (from_file == 0)
    fail(ErrorCode::kInvalidArgument, "--api-key-file '{}' holds no key", key_file);
}

bool ApiKeys::accepts(std::string_view authorization) const {
  // RFC 7235: the auth scheme is a case-insensitive token ("bearer" is as good as "Bearer").
  constexpr std::string_view kBearer = "bearer ";
  if (authorization.size() <= kBearer.size()) return false;
  for (size_t i = 0; i < kBearer.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(authorization[i])) != kBearer[i]) return false;
  }
  const std::string_view key = authorization.substr(kBearer.size());
  bool ok = false;
  for (const std::string& k : keys_) ok |= constant_time_equal(key, k);
  return ok;
}

}  // namespace rapide::serve
