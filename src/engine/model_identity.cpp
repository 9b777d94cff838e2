#include "engine/model_identity.h"

#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <vector>

#include "kv/block_hash.h"

namespace rapide {

namespace {
constexpr size_t kSampleBytes = 256;
}  // namespace

uint64_t model_identity(const Model& model, const KvLayout& layout) {
  const ModelConfig& c = model.config();
  std::string id = fmt::format(
      "{}|{}|dim {} layers {} heads {}/{} head {} ffn {} vocab {} eps {} theta {} scale {} "
      "rope {} tied {} bias {}|kv {} {} {} block {} type {}",
      c.architecture, c.name, c.dim, c.n_layers, c.n_heads, c.n_kv_heads, c.head_dim, c.ffn_dim,
      c.vocab_size, c.rms_eps, c.rope_theta, c.rope_scale, static_cast<int>(c.rope_style),
      c.tied_embeddings, c.qkv_bias, layout.n_layers, layout.n_kv_heads, layout.head_dim,
      layout.block_size, static_cast<int>(layout.type));
  // Keys that change K/V without changing a tensor (rope variants, norms, multipliers).
  id += fmt::format(
      "|rope dim {} scaling {} orig {} attn {} ext {} local {} global {}|norm {} pre {} post {} "
      "qk {} parallel {} scales {} {} {} {}|window {} {} {}",
      c.rope_dim, static_cast<int>(c.rope_scaling), c.rope_orig_context, c.yarn_attn_factor,
      c.yarn_ext_factor, c.rope_theta_local, c.rope_on_global_layers, static_cast<int>(c.norm_kind),
      c.pre_norms, c.post_norms, static_cast<int>(c.qk_norm), c.parallel_block, c.embedding_scale,
      c.residual_scale, c.query_scale, c.logit_scale, c.sliding_window,
      static_cast<int>(c.window_layers), c.window_period);
  for (const TensorView& t : model.file().tensors) {
    id += fmt::format("|{} {} [{}]", t.name, static_cast<int>(t.type), fmt::join(t.shape, ","));
    if (t.data == nullptr || t.size_bytes == 0) continue;
    // The start and the middle: quantized blocks and rows differ between fine-tunes.
    const size_t n = std::min(kSampleBytes, t.size_bytes);
    id.append(reinterpret_cast<const char*>(t.data), n);
    const size_t mid = t.size_bytes / 2;
    id.append(reinterpret_cast<const char*>(t.data) + mid, std::min(n, t.size_bytes - mid));
  }
  return hash_bytes(id);
}

uint64_t adapter_identity(const LoraAdapter& adapter) {
  std::string id = fmt::format("lora|{}|{}|{}|scale {}", adapter.name(), adapter.path(),
                               adapter.format(), adapter.user_scale());
  std::vector<float> row;
  for (int layer = 0; layer < adapter.n_layers(); ++layer) {
    for (int t = 0; t < kLoraTargetCount; ++t) {
      const LoraWeights* w = adapter.find(layer, static_cast<LoraTarget>(t));
      if (w == nullptr) continue;
      id += fmt::format("|{}.{} {}x{} {}x{} scale {}", layer, t, w->a.rows(), w->a.cols(),
                        w->b.rows(), w->b.cols(), w->scale);
      for (const WeightMatrix* m : {&w->a, &w->b}) {
        row.resize(static_cast<size_t>(m->cols()));
        m->dequantize_row(0, row.data());
        id.append(reinterpret_cast<const char*>(row.data()), row.size() * sizeof(float));
      }
    }
  }
  const uint64_t key = hash_bytes(id);
  return key == 0 ? 1 : key;  // 0 is the model alone
}

}  // namespace rapide
