#include "lora/lora_merge.h"

#include <charconv>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "formats/gguf_reader.h"
#include "formats/gguf_writer.h"
#include "kernels/matmul.h"

namespace rapide {

namespace {

// blk.N.<target>.weight -> the adapter's pair for it, or nullptr.
const LoraWeights* pair_for(const LoraAdapter& adapter, const std::string& name) {
  constexpr std::string_view kBlock = "blk.", kWeight = ".weight";
  if (!name.starts_with(kBlock) || !name.ends_with(kWeight)) return nullptr;
  const std::string_view rest =
      std::string_view(name).substr(kBlock.size(), name.size() - kBlock.size() - kWeight.size());
  const size_t dot = rest.find('.');
  if (dot == std::string_view::npos) return nullptr;
  int layer = 0;
  if (std::from_chars(rest.data(), rest.data() + dot, layer).ptr != rest.data() + dot) {
    return nullptr;
  }
  const std::optional<LoraTarget> target = lora_target_from_name(rest.substr(dot + 1));
  return target ? adapter.find(layer, *target) : nullptr;
}

// The rows of a prepared matrix as f32, row-major.
std::vector<float> rows_of(const WeightMatrix& m) {
  std::vector<float> out(static_cast<size_t>(m.rows() * m.cols()));
  for (int64_t r = 0; r < m.rows(); ++r) m.dequantize_row(r, out.data() + r * m.cols());
  return out;
}

}  // namespace

LoraMergeReport merge_lora(const std::string& base_path, const LoraSpec& spec,
                           const std::string& out_path) {
  std::error_code ec;
  if (base_path == out_path || std::filesystem::equivalent(base_path, out_path, ec)) {
    fail(ErrorCode::kInvalidArgument, "lora merge: the output is the base model itself ({})",
         out_path);
  }
  const ModelFile base = load_model(base_path);
  if (base.format != "gguf") {
    fail(ErrorCode::kInvalidArgument,
         "lora merge: the base '{}' is a {} model; merging writes GGUF from a GGUF base", base_path,
         base.format);
  }
  const std::shared_ptr<const LoraAdapter> adapter = load_lora(spec, base);
  const GgufFile in = GgufFile::open(base_path);

  GgufWriter w;
  for (const GgufKeyValue& kv : in.metadata()) w.set(kv.key, kv.value);
  LoraMergeReport report;
  for (const GgufTensorInfo& t : in.tensors()) {
    const LoraWeights* pair = pair_for(*adapter, t.name);
    if (pair == nullptr) {
      const uint8_t* src = t.data;
      const size_t size = t.size_bytes;
      w.add_tensor(t.name, t.type, t.shape, [=](uint8_t* out) { std::memcpy(out, src, size); });
      continue;
    }
    const TensorType to = is_float_type(t.type) ? t.type : TensorType::kF16;
    report.merged++;
    report.converted_f16 += to != t.type;
    const int64_t cols = t.shape[0], rows = t.shape[1];
    const TensorType from = t.type;
    const uint8_t* src = t.data;
    const std::shared_ptr<const LoraAdapter> keep = adapter;  // outlives the write
    w.add_tensor(t.name, to, t.shape, [=](uint8_t* out) {
      const std::vector<float> a = rows_of(pair->a), b = rows_of(pair->b);
      const int64_t rank = pair->a.rows();
      std::vector<float> row(static_cast<size_t>(cols));
      const int64_t in_row = tensor_row_bytes(from, cols), out_row = tensor_row_bytes(to, cols);
      for (int64_t o = 0; o < rows; ++o) {
        dequantize_row(from, src + o * in_row, row.data(), cols);
        for (int64_t i = 0; i < cols; ++i) {
          float delta = 0.0f;
          for (int64_t r = 0; r < rank; ++r) delta += a[r * cols + i] * b[o * rank + r];
          row[i] = delta * pair->scale + row[i];
        }
        quantize_row(to, row.data(), out + o * out_row, cols);
      }
      (void)keep;
    });
  }
  if (report.merged != adapter->count()) {
    fail(ErrorCode::kInternal, "lora merge: {} of the adapter's {} pairs found their matrix",
         report.merged, adapter->count());
  }
  w.write(out_path);
  report.bytes = w.tensor_data_bytes();
  return report;
}

}  // namespace rapide
