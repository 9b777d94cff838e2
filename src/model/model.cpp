// The forward pass of a Model (model.h); loading and sharding its weights: model_loading.cpp.
#include "model/model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "base/error.h"
#include "formats/architecture.h"
#include "formats/unused_tensors.h"
#include "kernels/ops.h"
#include "model/moe_routing.h"
#include "model/rope.h"

namespace rapide {

void Model::ensure_scratch(int n_tokens, int n_logits) {
  const ModelConfig& c = config_;
  if (n_tokens > scratch_tokens_) {
    const size_t n = static_cast<size_t>(n_tokens);
    x_.resize(n * c.dim);
    xn_.resize(n * c.dim);
    q_.resize(n * c.q_dim());
    k_.resize(n * c.kv_dim());
    v_.resize(n * c.kv_dim());
    att_.resize(n * std::max<size_t>(c.q_dim(), c.parallel_block ? c.dim : 0));
    const size_t width =
        static_cast<size_t>(std::max({c.ffn_dim, c.expert_ffn_dim, c.shared_expert_ffn_dim}));
    gate_.resize(n * width);
    up_.resize(n * width);
    if (c.n_experts > 0) {
      const size_t slots = n * static_cast<size_t>(c.n_experts_used);
      router_probs_.resize(n * c.n_experts);
      expert_id_.resize(slots);
      expert_weight_.resize(slots);
      expert_rows_.resize(slots);
      gathered_.resize(slots * c.dim);
      expert_out_.resize(slots * c.dim);
      slot_out_.resize(slots * c.dim);
      shared_out_.resize(n * c.dim);
    }
    const size_t half = static_cast<size_t>(c.rotary_dims() / 2);
    rope_cos_.resize(n * half);
    rope_sin_.resize(n * half);
    if (c.rope_theta_local > 0.0f) {
      rope_local_cos_.resize(n * half);
      rope_local_sin_.resize(n * half);
    }
    if (c.parallel_block) block_in_.resize(n * c.dim);
    scratch_tokens_ = n_tokens;
  }
  if (n_logits > scratch_logits_) {
    logits_in_.resize(static_cast<size_t>(n_logits) * c.dim);
    logits_.resize(static_cast<size_t>(n_logits) * c.vocab_size);
    scratch_logits_ = n_logits;
  }
}

// Before a pass is published to other ranks: a bad token fails the leader's pass alone,
// never a follower's (which would leave the others waiting for it).
void Model::check_tokens(const Batch& batch) const {
  for (const int32_t token : batch.tokens) {
    if (token < 0 || token >= config_.vocab_size) {
      fail(ErrorCode::kInvalidArgument, "token id {} is outside the vocabulary (0..{})", token,
           config_.vocab_size - 1);
    }
  }
  if (!batch.adapters.empty() && batch.adapters.size() != batch.tokens.size()) {
    fail(ErrorCode::kInvalidArgument, "batch of {} tokens names {} adapters", batch.size(),
         batch.adapters.size());
  }
  for (const int32_t adapter : batch.adapters) {
    if (adapter < kBaseAdapter || adapter >= lora_count()) {
      fail(ErrorCode::kInvalidArgument, "adapter index {} is not one of the model's {} adapters",
           adapter, lora_count());
    }
  }
}

int Model::find_lora(std::string_view name) const {
  for (int i = 0; i < lora_count(); ++i) {
    if (loras_[i]->name() == name) return i;
  }
  return -1;
}

const WeightMatrix* Model::lora_base(int layer, LoraTarget target) const {
  const LayerWeights& w = layers_[layer];
  switch (target) {
    case LoraTarget::kQ:
      return &w.wq;
    case LoraTarget::kK:
      return &w.wk;
    case LoraTarget::kV:
      return &w.wv;
    case LoraTarget::kOutput:
      return &w.wo;
    case LoraTarget::kGate:
      return moe_layer(layer) ? nullptr : &w.ffn_gate;
    case LoraTarget::kUp:
      return moe_layer(layer) ? nullptr : &w.ffn_up;
    case LoraTarget::kDown:
      return moe_layer(layer) ? nullptr : &w.ffn_down;
  }
  return nullptr;
}

int Model::add_lora(std::shared_ptr<const LoraAdapter> adapter) {
  const LoraAdapter& a = *adapter;
  if (tp_ != nullptr || pp_ != nullptr) {
    fail(ErrorCode::kUnsupported,
         "adapter '{}': LoRA adapters with --tp / --pp are not supported yet", a.name());
  }
  if (config_.mla()) {
    fail(ErrorCode::kUnsupported,
         "adapter '{}': LoRA adapters on {}'s latent attention are not supported", a.name(),
         config_.architecture);
  }
  if (a.n_layers() != config_.n_layers) {
    fail(ErrorCode::kInvalidArgument, "adapter '{}' is for a model of {} layers, not {}", a.name(),
         a.n_layers(), config_.n_layers);
  }
  if (find_lora(a.name()) >= 0) {
    fail(ErrorCode::kInvalidArgument, "two adapters are named '{}'", a.name());
  }
  for (int layer = 0; layer < config_.n_layers; ++layer) {
    for (int t = 0; t < kLoraTargetCount; ++t) {
      const LoraTarget target = static_cast<LoraTarget>(t);
      const LoraWeights* lw = a.find(layer, target);
      if (lw == nullptr) continue;
      const WeightMatrix* base = lora_base(layer, target);
      if (base == nullptr || base->empty()) {
        fail(ErrorCode::kUnsupported,
             "adapter '{}' adapts blk.{}.{}, which this model does not compute as one dense "
             "matrix",
             a.name(), layer, lora_target_name(target));
      }
      if (lw->a.cols() != base->cols() || lw->b.rows() != base->rows() ||
          lw->a.rows() != lw->b.cols()) {
        fail(ErrorCode::kInvalidArgument,
             "adapter '{}': blk.{}.{} has A {}x{} and B {}x{}, which do not fit the model's "
             "{}x{} matrix",
             a.name(), layer, lora_target_name(target), lw->a.rows(), lw->a.cols(), lw->b.rows(),
             lw->b.cols(), base->rows(), base->cols());
      }
    }
  }
  loras_.push_back(std::move(adapter));
  return lora_count() - 1;
}

void Model::embed(const Batch& batch) {
  for (int i = 0; i < batch.size(); ++i) {
    const int32_t token = batch.tokens[i];
    float* x = x_.data() + static_cast<size_t>(i) * config_.dim;
    if (token < vocab_slice_.begin || token >= vocab_slice_.end) {
      std::fill(x, x + config_.dim, 0.0f);  // another rank's row: the all-reduce brings it
      continue;
    }
    token_embedding_.dequantize_row(token - vocab_slice_.begin, x);
    if (config_.embedding_scale != 0.0f) {
      for (int d = 0; d < config_.dim; ++d) x[d] *= config_.embedding_scale;
    }
  }
  reduce_partial(x_.data(), batch.size());
}

// Rotation angles as llama.cpp computes them (model/rope.h), so rotated values match its
// reference runs bit for bit. Computed once per forward pass: every layer rotates by the same
// angles (gemma3's local layers by a second table of their own base).
void Model::prepare_rope(const Batch& batch) {
  const ModelConfig& c = config_;
  const size_t half = static_cast<size_t>(c.rotary_dims() / 2);
  const RopeParams global =
      rope_params(c, false, rope_factors_.empty() ? nullptr : rope_factors_.data());
  for (int i = 0; i < batch.size(); ++i) {
    rope_angles(global, batch.positions[i], rope_cos_.data() + i * half,
                rope_sin_.data() + i * half);
  }
  if (c.rope_theta_local > 0.0f) {
    const RopeParams local = rope_params(c, true, nullptr);
    for (int i = 0; i < batch.size(); ++i) {
      rope_angles(local, batch.positions[i], rope_local_cos_.data() + i * half,
                  rope_local_sin_.data() + i * half);
    }
  }
}

void Model::apply_rope(int layer, int begin, int end) {
  const ModelConfig& c = config_;
  const int half = c.rotary_dims() / 2;
  const bool neox = c.rope_style == RopeStyle::kNeox;
  const bool windowed = c.windowed(first_layer_ + layer);
  // cohere2's global layers attend without positions; gemma3's local layers have their own
  // base.
  const bool rotate = windowed || c.rope_on_global_layers;
  const bool local = windowed && c.rope_theta_local > 0.0f;
  const std::vector<float>& cos_table = local ? rope_local_cos_ : rope_cos_;
  const std::vector<float>& sin_table = local ? rope_local_sin_ : rope_sin_;
  for (int i = begin; i < end; ++i) {
    float* q = q_.data() + static_cast<size_t>(i) * c.q_dim();
    float* k = k_.data() + static_cast<size_t>(i) * c.kv_dim();
    if (rotate) {
      const float* cos_row = cos_table.data() + static_cast<size_t>(i) * half;
      const float* sin_row = sin_table.data() + static_cast<size_t>(i) * half;
      rope_rotate(q, c.n_heads, c.head_dim, 2 * half, cos_row, sin_row, neox);
      rope_rotate(k, c.n_kv_heads, c.head_dim, 2 * half, cos_row, sin_row, neox);
    }
    if (c.scale_query_first) {
      const float scale =
          c.query_scale != 0.0f ? c.query_scale : 1.0f / std::sqrt(static_cast<float>(c.head_dim));
      for (int64_t d = 0; d < c.q_dim(); ++d) q[d] *= scale;
    }
  }
}

void Model::norm_row(const float* x, const std::vector<float>& w, float* out) const {
  if (config_.norm_kind == NormKind::kLayer) {
    layer_norm(x, w.data(), config_.dim, config_.rms_eps, out);
  } else {
    rms_norm(x, w.data(), config_.dim, config_.rms_eps, out);
  }
}

void Model::qk_norm_rows(const LayerWeights& w, int begin, int end) {
  const ModelConfig& c = config_;
  if (c.qk_norm == QkNorm::kNone) return;
  for (int i = begin; i < end; ++i) {
    float* q = q_.data() + static_cast<size_t>(i) * c.q_dim();
    float* k = k_.data() + static_cast<size_t>(i) * c.kv_dim();
    if (c.qk_norm == QkNorm::kWhole) {
      rms_norm(q, w.q_norm.data(), c.q_dim(), c.rms_eps, q);
      rms_norm(k, w.k_norm.data(), c.kv_dim(), c.rms_eps, k);
      continue;
    }
    for (int h = 0; h < c.n_heads; ++h) {
      float* v = q + static_cast<size_t>(h) * c.head_dim;
      rms_norm(v, w.q_norm.data(), c.head_dim, c.rms_eps, v);
    }
    for (int h = 0; h < c.n_kv_heads; ++h) {
      float* v = k + static_cast<size_t>(h) * c.head_dim;
      rms_norm(v, w.k_norm.data(), c.head_dim, c.rms_eps, v);
    }
  }
}

// The per-token work between the matrix multiplies (norms, rope, the KV write, residual
// adds, the gated activation) is split over the pool by tokens: in a batch of a few hundred
// rows it is a fifth of the step when one thread does it while the others wait.
// Each token's arithmetic is the same whichever thread runs it. A chunk gets at least
// kMinChunkFloats of row data: below that a dispatch costs more than it saves (a tiny model's
// rows, or a decode step of a few sequences, stay on the calling thread).
namespace {
constexpr int64_t kMinChunkFloats = 16384;

// `multiple`: chunks are a multiple of this many tokens (see the KV write below).
template <typename F>
void for_tokens(ThreadPool& pool, int n, int64_t row_floats, F&& fn, int64_t multiple = 1) {
  int64_t grain = std::max<int64_t>(1, kMinChunkFloats / std::max<int64_t>(1, row_floats));
  grain = (grain + multiple - 1) / multiple * multiple;
  pool.parallel_for(n, grain, [&](int64_t begin, int64_t end, int) {
    fn(static_cast<int>(begin), static_cast<int>(end));
  });
}
}  // namespace

void Model::attention_block(int layer, const Batch& batch, KvStore& kv, ThreadPool& pool) {
  if (config_.mla()) return mla_attention_block(layer, batch, kv, pool);
  const ModelConfig& c = config_;
  const LayerWeights& w = layers_[layer];
  const int n = batch.size();
  const Products qkv = qkv_of(layer);
  const WeightMatrix::Input qkv_input = input_for(qkv.span(), n);
  for_tokens(pool, n, c.dim, [&](int begin, int end) {
    for (int i = begin; i < end; ++i) {
      const float* x = x_.data() + static_cast<size_t>(i) * c.dim;
      float* xn = xn_.data() + static_cast<size_t>(i) * c.dim;
      if (c.pre_norms) {
        norm_row(x, w.attn_norm, xn);
      } else {
        std::copy(x, x + c.dim, xn);  // olmo2: the residual stream itself
      }
      if (qkv_input == WeightMatrix::Input::kF16Exact) round_to_f16(xn, xn, c.dim);
    }
  });
  // A parallel block's FFN reads the same normed rows after the attention has reused xn_.
  if (c.parallel_block)
    std::copy(xn_.begin(), xn_.begin() + static_cast<size_t>(n) * c.dim, block_in_.begin());
  observe(layer, LinearInput::kAttnIn, xn_.data(), n, c.dim);
  float* const qkv_out[] = {q_.data(), k_.data(), v_.data()};
  const WeightMatrix* const wo[] = {&w.wo};
  WeightMatrix::stream_next(wo, n, pool);
  WeightMatrix::multiply_group(qkv.span(), xn_.data(), n, qkv_out, pool, qkv_input);
  apply_lora(layer, LoraTarget::kQ, xn_.data(), q_.data(), pool);
  apply_lora(layer, LoraTarget::kK, xn_.data(), k_.data(), pool);
  apply_lora(layer, LoraTarget::kV, xn_.data(), v_.data(), pool);
  // Chunks of whole KV blocks: K is stored transposed (a cache line holds one dimension of
  // several slots), so two threads writing neighbouring slots of one block passed its lines
  // back and forth. With 12-token chunks and 16-slot blocks, perf annotate put 73 % of
  // store_kv_row on the scatter's stores; in whole blocks a 128-token prefill ran 1.5 % (F16)
  // and 3 % (Q8_0) faster, a 32-row decode step 1-1.5 % (synth100m, paired in one process).
  for_tokens(
      pool, n, c.q_dim() + 2 * c.kv_dim(),
      [&](int begin, int end) {
        if (c.qkv_bias) {
          for (int i = begin; i < end; ++i) {
            add_in_place(q_.data() + static_cast<size_t>(i) * c.q_dim(), w.bq.data(), c.q_dim());
            add_in_place(k_.data() + static_cast<size_t>(i) * c.kv_dim(), w.bk.data(), c.kv_dim());
            add_in_place(v_.data() + static_cast<size_t>(i) * c.kv_dim(), w.bv.data(), c.kv_dim());
          }
        }
        qk_norm_rows(w, begin, end);
        apply_rope(layer, begin, end);
        Attention::write_kv(kv, layer, batch, k_.data(), v_.data(), begin, end);
      },
      kv.layout().block_size);
  AttentionScores shape;
  shape.scale = c.scale_query_first ? 1.0f : c.query_scale;  // 0: 1/sqrt(head_dim)
  shape.softcap = c.attn_softcap;
  shape.window = c.windowed(first_layer_ + layer) ? c.sliding_window : 0;
  attention_.attend_planned(kv, layer, batch, q_.data(), c.n_heads, att_.data(), pool, shape);
  // The output projection lands in xn_ (free now), then joins the residual stream.
  observe(layer, LinearInput::kAttnOut, att_.data(), n, c.q_dim());
  WeightMatrix::stream_next(ffn_start_of(layer).span(), n, pool);
  w.wo.multiply(att_.data(), n, xn_.data(), pool);
  apply_lora(layer, LoraTarget::kOutput, att_.data(), xn_.data(), pool);
  reduce_partial(xn_.data(), n);  // row-parallel: each rank summed over its heads only
}

// deepseek2: the attention norm, then multi-head latent attention on the cached latent rows
// (model/mla_attention.h), whose attn_output lands in xn_ as attention_block's does.
void Model::mla_attention_block(int layer, const Batch& batch, KvStore& kv, ThreadPool& pool) {
  const ModelConfig& c = config_;
  const LayerWeights& w = layers_[layer];
  const int n = batch.size();
  for_tokens(pool, n, c.dim, [&](int begin, int end) {
    for (int i = begin; i < end; ++i) {
      rms_norm(x_.data() + static_cast<size_t>(i) * c.dim, w.attn_norm.data(), c.dim, c.rms_eps,
               xn_.data() + static_cast<size_t>(i) * c.dim);
    }
  });
  observe(layer, LinearInput::kAttnIn, xn_.data(), n, c.dim);
  mla_.forward(w.mla, c, layer, batch, xn_.data(), kv, attention_, xn_.data(), pool);
}

void Model::gated_ffn(const WeightMatrix& gate, const WeightMatrix& up, const WeightMatrix& down,
                      const float* in, int n, int width, float* out, ThreadPool& pool, int layer,
                      std::span<const WeightMatrix* const> after, WeightMatrix::Input input) {
  const WeightMatrix* gate_up[] = {&gate, &up};
  float* const gate_up_out[] = {gate_.data(), up_.data()};
  const WeightMatrix* const down_only[] = {&down};
  WeightMatrix::stream_next(down_only, n, pool);
  WeightMatrix::multiply_group(gate_up, in, n, gate_up_out, pool, input);
  if (layer >= 0) {  // the dense FFN (experts are not adapted)
    apply_lora(layer, LoraTarget::kGate, in, gate_.data(), pool);
    apply_lora(layer, LoraTarget::kUp, in, up_.data(), pool);
  }
  const bool gelu = config_.activation == FfnActivation::kGeluTanh;
  const WeightMatrix::Input down_input = input_for(down_only, n);
  for_tokens(pool, n, width, [&](int begin, int end) {
    const size_t from = static_cast<size_t>(begin) * width;
    const int64_t count = static_cast<int64_t>(end - begin) * width;
    if (gelu) {
      gelu_tanh_mul(gate_.data() + from, up_.data() + from, count, gate_.data() + from);
    } else {
      silu_mul(gate_.data() + from, up_.data() + from, count, gate_.data() + from);
    }
    if (down_input == WeightMatrix::Input::kF16Exact) {
      round_to_f16(gate_.data() + from, gate_.data() + from, count);
    }
  });
  if (layer >= 0) observe(layer, LinearInput::kFfnDown, gate_.data(), n, width);
  WeightMatrix::stream_next(after, n, pool);
  down.multiply(gate_.data(), n, out, pool, down_input);
  if (layer >= 0) apply_lora(layer, LoraTarget::kDown, gate_.data(), out, pool);
}

// Routed experts (and the shared one): xn_ in, xn_ out. Each expert runs once over the rows
// routed to it, gathered in token order; each token then sums its experts' weighted outputs
// in routing order (largest weight first, as llama.cpp adds them), so its result does not
// depend on which other tokens share the batch.
void Model::moe_ffn(int layer, int n, ThreadPool& pool) {
  const ModelConfig& c = config_;
  const LayerWeights& w = layers_[layer];
  const int k = c.n_experts_used;
  const size_t dim = static_cast<size_t>(c.dim);
  w.router.multiply(xn_.data(), n, router_probs_.data(), pool);
  ExpertRouting routing;  // the defaults: softmax, no bias, no scale (Mixtral, Qwen2-MoE)
  routing.gating = c.expert_gating;
  routing.normalize = c.normalize_expert_weights;
  routing.scale = c.expert_weights_scale;
  routing.selection_bias = w.expert_bias.empty() ? nullptr : w.expert_bias.data();
  for (int i = 0; i < n; ++i) {
    route_token(router_probs_.data() + static_cast<size_t>(i) * c.n_experts, c.n_experts, k,
                routing, expert_id_.data() + static_cast<size_t>(i) * k,
                expert_weight_.data() + static_cast<size_t>(i) * k);
  }
  if (c.shared_expert_ffn_dim > 0) {
    gated_ffn(w.shared_gate, w.shared_up, w.shared_down, xn_.data(), n, c.shared_expert_ffn_dim,
              shared_out_.data(), pool);
    // qwen2moe's shared expert is gated per token; deepseek2's are always on.
    for (int i = 0; i < n && c.shared_expert_gated; ++i) {
      const float* x = xn_.data() + i * dim;
      float g = 0.0f;
      for (size_t d = 0; d < dim; ++d) g += w.shared_gate_inp[d] * x[d];
      // llama.cpp's sigmoid here is silu(g) / g.
      const float gate = g == 0.0f ? 0.5f : g / (1.0f + std::exp(-g)) / g;
      float* out = shared_out_.data() + i * dim;
      for (size_t d = 0; d < dim; ++d) out[d] *= gate;
    }
  }
  for (int e = 0; e < c.n_experts; ++e) {
    int m = 0;
    for (int slot = 0; slot < n * k; ++slot) {
      if (expert_id_[slot] != e) continue;
      expert_rows_[m] = slot;
      std::memcpy(gathered_.data() + m * dim, xn_.data() + (slot / k) * dim, dim * sizeof(float));
      ++m;
    }
    if (m == 0) continue;  // no token chose it: its weights are not read this step
    ++last_forward_expert_runs_;
    for (const WeightMatrix* x : {&w.expert_gate[e], &w.expert_up[e], &w.expert_down[e]}) {
      last_forward_weight_bytes_ +=
          static_cast<uint64_t>(tensor_row_bytes(x->type(), x->cols())) * x->rows();
    }
    gated_ffn(w.expert_gate[e], w.expert_up[e], w.expert_down[e], gathered_.data(), m,
              c.expert_ffn_dim, expert_out_.data(), pool);
    for (int r = 0; r < m; ++r) {
      const int slot = expert_rows_[r];
      const float weight = expert_weight_[slot];
      const float* src = expert_out_.data() + r * dim;
      float* dst = slot_out_.data() + slot * dim;
      for (size_t d = 0; d < dim; ++d) dst[d] = src[d] * weight;
    }
  }
  for (int i = 0; i < n; ++i) {
    float* out = xn_.data() + i * dim;
    const float* slots = slot_out_.data() + static_cast<size_t>(i) * k * dim;
    std::memcpy(out, slots, dim * sizeof(float));
    for (int s = 1; s < k; ++s) add_in_place(out, slots + s * dim, c.dim);
    if (c.shared_expert_ffn_dim > 0) add_in_place(out, shared_out_.data() + i * dim, c.dim);
  }
}

void Model::ffn_block(int layer, int n, ThreadPool& pool) {
  const ModelConfig& c = config_;
  const LayerWeights& w = layers_[layer];
  const float rs = c.residual_scale;
  // The attention output (in xn_) joins the residual stream (after a post-norm, times
  // granite's residual scale), then the FFN's norm reads it. Experts read the normed rows for
  // routing as well: only a dense FFN's input is rounded here. A parallel block (cohere2)
  // keeps the attention output aside (in att_, free now) and feeds the FFN the block's
  // normed input; both join the stream at the end, as llama.cpp adds them: (ffn + x) + attn.
  const WeightMatrix::Input ffn_input =
      moe_layer(layer) ? WeightMatrix::Input::kF32 : input_for(ffn_start_of(layer).span(), n);
  for_tokens(pool, n, c.dim, [&](int begin, int end) {
    for (int i = begin; i < end; ++i) {
      float* x = x_.data() + static_cast<size_t>(i) * c.dim;
      float* xn = xn_.data() + static_cast<size_t>(i) * c.dim;
      if (c.parallel_block) {
        float* a = att_.data() + static_cast<size_t>(i) * c.dim;
        std::copy(xn, xn + c.dim, a);
        std::copy(block_in_.data() + static_cast<size_t>(i) * c.dim,
                  block_in_.data() + static_cast<size_t>(i + 1) * c.dim, xn);
      } else {
        if (c.post_norms) rms_norm(xn, w.post_attn_norm.data(), c.dim, c.rms_eps, xn);
        if (rs != 1.0f) {
          for (int d = 0; d < c.dim; ++d) xn[d] *= rs;
        }
        add_in_place(x, xn, c.dim);
        if (c.pre_norms) {
          norm_row(x, w.ffn_norm, xn);
        } else {
          std::copy(x, x + c.dim, xn);  // olmo2
        }
      }
      if (ffn_input == WeightMatrix::Input::kF16Exact) round_to_f16(xn, xn, c.dim);
    }
  });
  if (moe_layer(layer)) {
    moe_ffn(layer, n, pool);
  } else {
    observe(layer, LinearInput::kFfnIn, xn_.data(), n, c.dim);
    gated_ffn(w.ffn_gate, w.ffn_up, w.ffn_down, xn_.data(), n, c.ffn_dim, xn_.data(), pool, layer,
              after_ffn_of(layer).span(), ffn_input);
    reduce_partial(xn_.data(), n);  // row-parallel: each rank summed over its FFN slice only
  }
  for_tokens(pool, n, c.dim, [&](int begin, int end) {
    for (int i = begin; i < end; ++i) {
      float* xn = xn_.data() + static_cast<size_t>(i) * c.dim;
      if (c.post_norms) rms_norm(xn, w.post_ffn_norm.data(), c.dim, c.rms_eps, xn);
      if (rs != 1.0f) {
        for (int d = 0; d < c.dim; ++d) xn[d] *= rs;
      }
    }
    const size_t from = static_cast<size_t>(begin) * c.dim;
    const int64_t count = static_cast<int64_t>(end - begin) * c.dim;
    add_in_place(x_.data() + from, xn_.data() + from, count);
    if (c.parallel_block) add_in_place(x_.data() + from, att_.data() + from, count);
  });
}

Model::Products Model::qkv_of(int layer) const {
  const LayerWeights& w = layers_[layer];
  if (config_.mla()) return {{&w.mla.q_in(), &w.mla.kv_a}, 2};
  return {{&w.wq, &w.wk, &w.wv}, 3};
}

Model::Products Model::ffn_start_of(int layer) const {
  const LayerWeights& w = layers_[layer];
  if (moe_layer(layer)) return {{&w.router}, 1};
  return {{&w.ffn_gate, &w.ffn_up}, 2};
}

Model::Products Model::after_ffn_of(int layer) const {
  if (layer + 1 < config_.n_layers) return qkv_of(layer + 1);
  return {{&output_}, 1};
}

void Model::run_layers(const Batch& batch, KvStore& kv, ThreadPool& pool) {
  embed(batch);
  run_stage_layers(batch, kv, pool);
}

void Model::run_stage_layers(const Batch& batch, KvStore& kv, ThreadPool& pool) {
  prepare_rope(batch);
  lora_rows_.plan(batch.adapters, batch.size());
  // Every layer's attention runs the same jobs. Blocks are in place: the caller made the
  // block tables cover every position the batch writes.
  attention_.plan(kv, batch, config_.n_heads);
  for (int layer = 0; layer < config_.n_layers; ++layer) {
    attention_block(layer, batch, kv, pool);
    ffn_block(layer, batch.size(), pool);
  }
}

std::span<const float> Model::final_hidden(int n) {
  const int dim = config_.dim;
  hidden_.resize(static_cast<size_t>(n) * dim);
  for (int i = 0; i < n; ++i) {
    norm_row(x_.data() + static_cast<size_t>(i) * dim, output_norm_,
             hidden_.data() + static_cast<size_t>(i) * dim);
  }
  return {hidden_.data(), hidden_.size()};
}

std::span<const float> Model::forward_hidden(const Batch& batch, KvStore& kv, ThreadPool& pool) {
  const int n = batch.size();
  if (n == 0) return {};
  check_tokens(batch);
  if (pp_ != nullptr) return forward_pipelined(batch, kv, pool, true);
  ensure_scratch(n, 0);
  if (tp_ != nullptr) tp_->begin_forward(batch, kv, true);
  last_forward_expert_runs_ = 0;
  last_forward_weight_bytes_ = weight_bytes_ - all_expert_bytes_;
  run_layers(batch, kv, pool);
  return final_hidden(n);
}

std::span<const float> Model::forward(const Batch& batch, KvStore& kv, ThreadPool& pool) {
  const int n = batch.size();
  if (n == 0) return {};
  check_tokens(batch);
  if (pp_ != nullptr) return forward_pipelined(batch, kv, pool, false);
  ensure_scratch(n, batch.logits_count());
  if (tp_ != nullptr) tp_->begin_forward(batch, kv, false);
  last_forward_expert_runs_ = 0;
  last_forward_weight_bytes_ = weight_bytes_ - all_expert_bytes_;  // experts add as they run
  run_layers(batch, kv, pool);
  return head(batch, pool);
}

std::span<const float> Model::head(const Batch& batch, ThreadPool& pool) {
  const int n = batch.size();
  const int n_logits = batch.logits_count();
  if (n_logits == 0) return {};
  // Only the rows that need logits pay for the final norm and the (large) output head.
  const int dim = config_.dim;
  int row = 0;
  for (int i = 0; i < n; ++i) {
    if (!batch.needs_logits[i]) continue;
    norm_row(x_.data() + static_cast<size_t>(i) * dim, output_norm_,
             logits_in_.data() + static_cast<size_t>(row) * dim);
    ++row;
  }
  observe(-1, LinearInput::kOutput, logits_in_.data(), n_logits, dim);
  // Vocabulary-parallel: each rank scores its slice, the leader gathers whole rows.
  float* scores = logits_.data();
  if (tp_ != nullptr) {
    logits_slice_.resize(static_cast<size_t>(n_logits) * vocab_slice_.size());
    scores = logits_slice_.data();
  }
  output_.multiply(logits_in_.data(), n_logits, scores, pool);
  if (config_.logit_scale != 1.0f) {
    const int64_t count = static_cast<int64_t>(n_logits) * vocab_slice_.size();
    for (int64_t j = 0; j < count; ++j) scores[j] *= config_.logit_scale;
  }
  if (config_.final_softcap > 0.0f) {
    soft_cap(scores, static_cast<int64_t>(n_logits) * vocab_slice_.size(), config_.final_softcap);
  }
  if (tp_ != nullptr) {
    const bool leader = tp_->rank() == 0;
    tp_->gather_columns(scores, n_logits, config_.vocab_size, leader ? logits_.data() : nullptr);
    if (!leader) return {};
  }
  return {logits_.data(), static_cast<size_t>(n_logits) * config_.vocab_size};
}

// Micro-batches are consecutive token ranges: on every stage they run in order, so each
// token finds its sequence's earlier positions in this stage's KV. Stage 0 keeps embedding
// and running the next micro-batch while later stages run the earlier ones.
std::span<const float> Model::forward_pipelined(const Batch& batch, KvStore& kv, ThreadPool& pool,
                                                bool hidden_only) {
  const int n = batch.size(), dim = config_.dim;
  const int parts = std::clamp(pp_->micro_batches(n), 1, n);
  ensure_scratch(static_cast<int>(slice_range(n, parts, 0).size()), batch.logits_count());
  pp_->begin_forward(batch, kv, hidden_only);
  last_forward_expert_runs_ = 0;
  last_forward_weight_bytes_ = weight_bytes_ - all_expert_bytes_;
  const int width = hidden_only ? dim : config_.vocab_size;
  std::vector<int> out_rows(parts);
  Batch part;
  for (int m = 0; m < parts; ++m) {
    const SliceRange r = slice_range(n, parts, m);
    part.clear();
    for (int64_t i = r.begin; i < r.end; ++i) {
      part.add(batch.tokens[i], batch.seq_ids[i], batch.positions[i], batch.needs_logits[i] != 0);
    }
    const int pn = part.size();
    out_rows[m] = hidden_only ? pn : part.logits_count();
    if (has_input_) {
      embed(part);
    } else {
      pp_->receive_previous(x_.data(), static_cast<size_t>(pn) * dim);
    }
    run_stage_layers(part, kv, pool);
    if (!has_output_) {
      pp_->send_next(x_.data(), static_cast<size_t>(pn) * dim);
    } else if (out_rows[m] > 0) {
      // With --tp too, every rank of the last stage takes part in the head (its logits
      // gather); its tensor rank 0 holds the result and sends it.
      const std::span<const float> out = hidden_only ? final_hidden(pn) : head(part, pool);
      if (tp_ == nullptr || tp_->rank() == 0) pp_->send_output(out.data(), out.size());
    }
  }
  // Only the job's leader (stage 0, tensor rank 0) collects the outputs.
  if (!has_input_ || (tp_ != nullptr && tp_->rank() != 0)) {
    pp_->end_forward();
    return {};
  }
  std::vector<float>& out = hidden_only ? hidden_ : logits_;
  if (hidden_only) hidden_.resize(static_cast<size_t>(n) * dim);  // logits_: ensure_scratch
  size_t at = 0;
  for (int m = 0; m < parts; ++m) {
    const size_t count = static_cast<size_t>(out_rows[m]) * width;
    if (count == 0) continue;
    pp_->receive_output(out.data() + at, count);
    at += count;
  }
  pp_->end_forward();
  return {out.data(), at};
}

}  // namespace rapide
