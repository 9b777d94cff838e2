// File helpers for the conformance tests (shared assets are read in place).
#pragma once

#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

#include "test_paths.h"

namespace rapide::testing {

// Throws for a file that cannot be opened: an absent reference must not read as "".
inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path);
  std::ostringstream contents;
  contents << in.rdbuf();
  return contents.str();
}

}  // namespace rapide::testing
