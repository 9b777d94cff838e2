// Paths of the shared test assets, overridable with RAPIDE_SHARED_DIR at run time.
#pragma once

#include <cstdlib>
#include <string>

namespace rapide::testing {

inline std::string shared_dir() {
  const char* env = std::getenv("RAPIDE_SHARED_DIR");
  return env ? env : RAPIDE_SHARED_DIR;
}
inline std::string shared_path(const std::string& relative) { return shared_dir() + "/" + relative; }
inline std::string test_data_path(const std::string& relative) {
  return std::string(RAPIDE_TEST_DATA_DIR) + "/" + relative;
}
inline std::string rapide_binary() { return RAPIDE_BINARY; }

}  // namespace rapide::testing
