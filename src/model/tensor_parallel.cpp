#include "model/tensor_parallel.h"

#include <cstring>
#include <vector>

#include "base/error.h"

namespace rapide {

SliceRange slice_range(int64_t total, int parts, int index) {
  const int64_t base = total / parts, extra = total % parts;
  const int64_t begin = index * base + std::min<int64_t>(index, extra);
  return {begin, begin + base + (index < extra ? 1 : 0)};
}

namespace {

// A row-parallel matrix is cut between columns: every rank's cut must fall on a block edge
// of the weight's type, or the shard would hold half a block.
void check_column_cut(const ModelFile& file, const std::string& name, int64_t width, int size) {
  const TensorView* view = file.find(name);
  if (view == nullptr) return;  // absent tensors are the loader's error, not the split's
  const int64_t block = tensor_type_block_size(view->type);
  const int64_t cut = width / size;
  if (cut % block != 0) {
    fail(ErrorCode::kInvalidArgument,
         "cannot split '{}' over {} ranks: each rank's {} columns are not a whole number of "
         "{} blocks ({} values)",
         name, size, cut, tensor_type_name(view->type), block);
  }
}

}  // namespace

void check_tensor_split(const ModelFile& file, int size) {
  if (size <= 1) return;
  const ModelConfig& c = file.config;
  if (c.mla()) {
    fail(ErrorCode::kUnsupported,
         "cannot split '{}' over {} ranks: tensor parallelism of multi-head latent attention "
         "(MLA, deepseek2) is not supported",
         file.path, size);
  }
  if (c.n_experts > 0) {
    fail(ErrorCode::kInvalidArgument,
         "cannot split '{}' over {} ranks: tensor parallelism of mixture-of-experts layers is "
         "not supported",
         file.path, size);
  }
  if (c.n_heads % size != 0 || c.n_kv_heads % size != 0) {
    fail(ErrorCode::kInvalidArgument,
         "cannot split '{}' over {} ranks: {} heads / {} kv heads are not divisible by {}",
         file.path, size, c.n_heads, c.n_kv_heads, size);
  }
  if (c.ffn_dim % size != 0) {
    fail(ErrorCode::kInvalidArgument,
         "cannot split '{}' over {} ranks: FFN width {} is not divisible by {}", file.path, size,
         c.ffn_dim, size);
  }
  if (c.vocab_size < size) {
    fail(ErrorCode::kInvalidArgument, "cannot split '{}' over {} ranks: vocabulary of {}",
         file.path, size, c.vocab_size);
  }
  for (int l = 0; l < c.n_layers; ++l) {
    const std::string prefix = "blk." + std::to_string(l) + ".";
    check_column_cut(file, prefix + "attn_output.weight", c.q_dim(), size);
    check_column_cut(file, prefix + "ffn_down.weight", c.ffn_dim, size);
  }
}

ModelConfig shard_config(const ModelConfig& full, int size) {
  ModelConfig c = full;
  c.n_heads /= size;
  c.n_kv_heads /= size;
  c.ffn_dim /= size;
  return c;
}

WeightMatrix prepare_columns(const TensorView& view, int64_t begin, int64_t end, ActQuant act) {
  const int64_t cols = view.row_length(), rows = view.rows();
  const int64_t block = tensor_type_block_size(view.type);
  if (begin < 0 || end > cols || begin >= end || begin % block != 0 || end % block != 0) {
    fail(ErrorCode::kInvalidArgument, "tensor '{}': column range [{}, {}) is not a {} block cut",
         view.name, begin, end, tensor_type_name(view.type));
  }
  // prepare() repacks into memory it owns, so the sliced rows only live during the call;
  // only this rank's byte ranges of the mapping are read.
  const int64_t row_bytes = tensor_row_bytes(view.type, cols);
  const int64_t skip = tensor_row_bytes(view.type, begin);
  const int64_t keep = tensor_row_bytes(view.type, end - begin);
  std::vector<uint8_t> sliced(static_cast<size_t>(keep * rows));
  for (int64_t r = 0; r < rows; ++r) {
    std::memcpy(sliced.data() + r * keep, view.data + r * row_bytes + skip,
                static_cast<size_t>(keep));
  }
  TensorView part = view;
  part.shape = {end - begin, rows};
  part.data = sliced.data();
  part.size_bytes = sliced.size();
  return WeightMatrix::prepare(part, act);
}

}  // namespace rapide
