// Writer of GGUF v3 files that llama.cpp reads: metadata of every GGUF type, then tensors
// (F32/F16/BF16/Q8_0/Q4_0 as raw bytes in ggml's block layouts), each tensor's data aligned
// to general.alignment (32 unless set) and zero-padded.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "formats/gguf_value.h"
#include "formats/tensor_type.h"

namespace rapide {

class GgufWriter {
 public:
  // Produces a tensor's bytes at write time into `out` (sized for the tensor), so a large
  // file can be generated tensor by tensor without holding all of it in memory.
  using Fill = std::function<void(uint8_t* out)>;
  using Progress = std::function<void(size_t tensors_done, size_t tensor_count)>;

  // Adds a key, or replaces its value in place (keys keep their first position).
  void set(const std::string& key, GgufValue value);
  const GgufValue* find(const std::string& key) const;

  // Throws kInvalidArgument for a duplicate name, 0 or more than 4 dims, a non-positive
  // dim, a row length that is not a multiple of the type's block, or (for the copying
  // overload) a byte count that does not match the shape.
  void add_tensor(const std::string& name, TensorType type, std::vector<int64_t> shape,
                  const void* data, size_t size_bytes);
  void add_tensor(const std::string& name, TensorType type, std::vector<int64_t> shape, Fill fill);

  size_t tensor_count() const { return tensors_.size(); }
  uint64_t tensor_data_bytes() const;  // payload bytes, without alignment padding

  // Writes to `path` through a temporary file renamed at the end, so a failed or interrupted
  // write never leaves a half-written model under the final name. Throws kUnavailable on I/O
  // errors.
  void write(const std::string& path, const Progress& progress = {}) const;
  std::vector<uint8_t> to_bytes() const;

 private:
  struct Tensor {
    std::string name;
    TensorType type;
    std::vector<int64_t> shape;
    size_t size_bytes;
    std::vector<uint8_t> bytes;  // when given up front
    Fill fill;                   // otherwise
  };
  using Sink = std::function<void(const void* data, size_t size)>;
  size_t check_tensor(const std::string& name, TensorType type, const std::vector<int64_t>& shape);
  uint32_t alignment() const;
  void emit(const Sink& sink, const Progress& progress) const;

  std::vector<std::pair<std::string, GgufValue>> metadata_;
  std::vector<Tensor> tensors_;
};

}  // namespace rapide
