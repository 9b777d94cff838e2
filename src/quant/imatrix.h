// llama.cpp's importance-matrix file (the legacy imatrix.dat that llama-imatrix writes and
// llama-quantize --imatrix reads), so a matrix collected here quantizes with llama.cpp and
// one collected there quantizes here. Little-endian, as llama.cpp writes it on x86:
//   int32 n_entries
//   n_entries x { int32 name_len, name bytes (no NUL), int32 ncall, int32 nval,
//                 nval x f32 values }
//   int32 last_call (chunks processed), int32 dataset_len, dataset bytes
// values[i] is the mean of x_i^2 over the tokens seen, times ncall (llama.cpp divides by
// ncall when it loads them): mean_sq() undoes that. Names are tensor names
// ("blk.0.attn_q.weight"); matrices that read the same input have equal entries.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace rapide::quant {

struct ImatrixEntry {
  std::string name;
  int32_t ncall = 0;
  std::vector<float> values;

  // Per-channel mean of x^2 (values / ncall).
  std::vector<float> mean_sq() const;
};

struct Imatrix {
  std::vector<ImatrixEntry> entries;
  int32_t last_call = 0;
  std::string dataset;  // the calibration file's name, as llama-imatrix records it

  const ImatrixEntry* find(const std::string& name) const;  // nullptr if absent
};

std::string serialize_imatrix(const Imatrix& m);
// Throws Error(kCorrupt) for a truncated or inconsistent file.
Imatrix parse_imatrix(const std::string& bytes, const std::string& source);

void write_imatrix(const std::string& path, const Imatrix& m);
Imatrix read_imatrix(const std::string& path);  // throws kNotFound / kCorrupt

}  // namespace rapide::quant
