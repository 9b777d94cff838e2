#include "train/gguf_export.h"

#include "base/error.h"
#include "formats/llama_shape.h"
#include "formats/quant_plan.h"
#include "kernels/matmul.h"

namespace rapide::train {

void write_gguf(const TrainModel& model, const GgufFile& tokenizer_source, TensorType type,
                const std::string& name, const std::string& path) {
  if (type != TensorType::kF32 && type != TensorType::kF16) {
    fail(ErrorCode::kInvalidArgument, "trained models are written as f32 or f16");
  }
  const TrainShape& s = model.shape();
  LlamaShape shape{.dim = s.dim,
                   .layers = s.layers,
                   .heads = s.heads,
                   .kv_heads = s.kv_heads,
                   .ffn = s.ffn,
                   .ctx = s.ctx,
                   .vocab = s.vocab,
                   .rms_eps = s.rms_eps,
                   .rope_base = s.rope_theta};
  GgufWriter w;
  set_llama_hyperparameters(w, shape);
  if (s.head_dim * s.heads != s.dim) {
    w.set("llama.attention.key_length", GgufValue::u32(static_cast<uint32_t>(s.head_dim)));
    w.set("llama.attention.value_length", GgufValue::u32(static_cast<uint32_t>(s.head_dim)));
  }
  w.set("llama.rope.dimension_count", GgufValue::u32(static_cast<uint32_t>(s.head_dim)));
  if (s.rope_scale != 1.0f) {
    w.set("llama.rope.scaling.type", GgufValue::string("linear"));
    w.set("llama.rope.scaling.factor", GgufValue::f32(s.rope_scale));
  }
  w.set("general.name", GgufValue::string(name));
  w.set("general.file_type", GgufValue::u32(llama_file_type(type)));
  for (const GgufKeyValue& kv : tokenizer_source.metadata()) {
    if (kv.key.starts_with("tokenizer.")) w.set(kv.key, kv.value);
  }
  for (const ParamTensor& t : model.tensors()) {
    const float* data = model.params().data() + t.offset;
    if (!t.matrix || type == TensorType::kF32) {
      w.add_tensor(t.name, TensorType::kF32, t.shape, data, static_cast<size_t>(t.size) * 4);
      continue;
    }
    const ParamTensor tensor = t;
    w.add_tensor(t.name, type, t.shape, [tensor, data, type](uint8_t* out) {
      const int64_t cols = tensor.shape[0], rows = tensor.size / cols;
      const int64_t row_bytes = tensor_row_bytes(type, cols);
      for (int64_t r = 0; r < rows; ++r)
        quantize_row(type, data + r * cols, out + r * row_bytes, cols);
    });
  }
  w.write(path);
}

}  // namespace rapide::train
