#include "formats/model_summary.h"

#include <filesystem>
#include <map>

namespace rapide {

namespace {

// A file's size, or the sum of the regular files of a folder (a Hugging Face model).
uint64_t bytes_on_disk(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (path.empty()) return 0;
  if (fs::is_regular_file(path, ec)) return fs::file_size(path, ec);
  uint64_t total = 0;
  if (!fs::is_directory(path, ec)) return 0;
  for (const auto& entry : fs::directory_iterator(path, ec)) {
    if (entry.is_regular_file(ec)) total += entry.file_size(ec);
  }
  return total;
}

}  // namespace

ModelSummary summarize_model(const ModelFile& model) {
  ModelSummary s;
  std::map<TensorType, uint64_t> bytes_by_type;
  for (const TensorView& t : model.tensors) {
    s.parameters += static_cast<uint64_t>(t.element_count());
    bytes_by_type[t.type] += t.size_bytes;
  }
  uint64_t most = 0;
  for (const auto& [type, bytes] : bytes_by_type) {
    if (bytes > most) {
      most = bytes;
      s.weight_type = std::string(tensor_type_name(type));
    }
  }
  s.file_bytes = bytes_on_disk(model.path);
  return s;
}

KvFootprint kv_footprint(const ModelConfig& c) {
  constexpr uint64_t kF16 = 2;
  const uint64_t layers = static_cast<uint64_t>(c.n_layers);
  KvFootprint f;
  if (c.mla()) {
    f.bytes_per_token = 2 * layers * static_cast<uint64_t>(c.kv_lora_rank + c.mla_rope_dim) * kF16;
    f.expanded_bytes_per_token =
        layers * static_cast<uint64_t>(c.n_heads) *
        static_cast<uint64_t>(c.mla_nope_dim + c.mla_rope_dim + c.mla_v_dim) * kF16;
  } else {
    f.bytes_per_token = 2 * layers * static_cast<uint64_t>(c.kv_dim()) * kF16;
    f.expanded_bytes_per_token = f.bytes_per_token;
  }
  return f;
}

}  // namespace rapide
