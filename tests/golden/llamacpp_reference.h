// Readers for shared/reference/llamacpp (see its README): the token sequences of tokens.txt
// and llama.cpp's logits files, float32 [n_tokens][vocab] with row i predicting token i+1.
// Both throw std::runtime_error for a missing or malformed file, so a test fails loudly.
#pragma once

#include <cstdint>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace rapide::testing {

struct ReferenceSequence {
  std::string name;  // story64, long200, short16
  std::vector<int32_t> tokens;
};

inline std::vector<ReferenceSequence> read_reference_sequences(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open " + path);
  std::vector<ReferenceSequence> out;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    ReferenceSequence s;
    size_t n = 0;
    if (!(fields >> s.name >> n)) throw std::runtime_error("malformed line in " + path);
    s.tokens.resize(n);
    for (int32_t& id : s.tokens) {
      if (!(fields >> id)) throw std::runtime_error(path + ": " + s.name + " has too few ids");
    }
    out.push_back(std::move(s));
  }
  if (out.empty()) throw std::runtime_error(path + " holds no sequence");
  return out;
}

// n_tokens x vocab floats, little-endian as written (this host is little-endian too).
inline std::vector<float> read_reference_logits(const std::string& path, size_t n_tokens,
                                                size_t vocab) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path);
  std::vector<float> out(n_tokens * vocab);
  in.read(reinterpret_cast<char*>(out.data()), static_cast<std::streamsize>(out.size() * 4));
  if (in.gcount() != static_cast<std::streamsize>(out.size() * 4) || in.peek() != EOF) {
    throw std::runtime_error(path + " is not " + std::to_string(n_tokens) + " x " +
                             std::to_string(vocab) + " float32 values");
  }
  return out;
}

}  // namespace rapide::testing
