// File helpers for the conformance tests (shared assets are read in place).
#pragma once

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "test_paths.h"

namespace rapide::testing {

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream contents;
  contents << in.rdbuf();
  return contents.str();
}

inline bool shared_exists(const std::string& relative) {
  return std::filesystem::exists(shared_path(relative));
}

}  // namespace rapide::testing
