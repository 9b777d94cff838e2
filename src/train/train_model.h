// A Llama-family decoder held as F32 master weights for training: embedding, per layer
// RMSNorm -> grouped-query attention with RoPE -> residual, RMSNorm -> SwiGLU FFN ->
// residual, then the final norm and a tied or untied output head. It computes what
// Model::forward computes (same rope angles, same block), in F32 on whole sequences, and
// keeps every activation of the last forward() so backward() can run.
//
// Parameters live in one flat buffer (and their gradients in a second one of the same
// layout): the optimizer and checkpoints see a single array; tensors are named ranges in it,
// with GGUF's names and shapes (formats/model_file.h), so export is a copy per tensor.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "formats/model_file.h"

namespace rapide::train {

struct TrainShape {
  int dim = 0, layers = 0, heads = 0, kv_heads = 0, head_dim = 0, ffn = 0, vocab = 0, ctx = 0;
  float rms_eps = 1e-5f;
  float rope_theta = 10000.0f;
  float rope_scale = 1.0f;
  bool neox = false;
  bool tied = true;  // output head = token embedding

  int64_t q_dim() const { return static_cast<int64_t>(heads) * head_dim; }
  int64_t kv_dim() const { return static_cast<int64_t>(kv_heads) * head_dim; }
  // Throws kInvalidArgument naming what is inconsistent.
  void check() const;
  bool operator==(const TrainShape&) const = default;
};

// The shape of a loaded model. Throws kUnsupported for blocks training does not implement
// (biases, fused tensors, post-norms, soft-caps, sliding windows, experts, GeGLU).
TrainShape shape_of(const ModelConfig& config);

struct ParamTensor {
  std::string name;              // GGUF name, e.g. "blk.0.attn_q.weight"
  std::vector<int64_t> shape;    // ggml order: {cols, rows} or {n}
  int64_t offset = 0, size = 0;  // range in the flat buffer
  bool matrix = false;           // weight decay applies to matrices only
};

class TrainModel {
 public:
  // Zero weights of `shape` (the layout only).
  explicit TrainModel(const TrainShape& shape);
  // Norm weights 1, matrices N(0, 0.02), the output projections of each residual branch
  // scaled by 1/sqrt(2 layers) (GPT-2's initialisation), from a seeded generator.
  static TrainModel random(const TrainShape& shape, uint64_t seed);
  // A copy of a loaded model's weights, dequantized to F32.
  static TrainModel from_file(const ModelFile& file);

  const TrainShape& shape() const { return shape_; }
  const std::vector<ParamTensor>& tensors() const { return tensors_; }
  const ParamTensor& tensor(const std::string& name) const;  // throws kNotFound
  float* data(const std::string& name) { return params_.data() + tensor(name).offset; }
  const float* data(const std::string& name) const { return params_.data() + tensor(name).offset; }
  std::vector<float>& params() { return params_; }
  const std::vector<float>& params() const { return params_; }
  std::vector<float>& grads() { return grads_; }
  const float* grad(const std::string& name) const { return grads_.data() + tensor(name).offset; }
  int64_t parameter_count() const { return static_cast<int64_t>(params_.size()); }

  // Runs batch sequences of seq tokens (row-major, seq <= ctx, positions 0..seq-1) and
  // returns the logits, batch*seq rows of vocab floats, valid until the next forward().
  std::span<const float> forward(const int32_t* tokens, int batch, int seq);
  // Adds the gradient of the loss to grads(), given dloss/dlogits of the last forward()
  // (batch*seq rows of vocab floats).
  void backward(const float* dlogits);
  // The residual stream of the last forward() entering layer `layer` (layer == layers:
  // leaving the last one), batch*seq rows of dim floats.
  const float* residual(int layer) const;

 private:
  struct LayerOffsets {
    int64_t attn_norm, wq, wk, wv, wo, ffn_norm, gate, up, down;
  };
  struct LayerActs {
    std::vector<float> x_in, xn1, r1, q, k, v, probs, att, x_mid, xn2, r2, g, u, h;
  };
  void add(const std::string& name, std::vector<int64_t> shape, bool matrix);
  const float* p(int64_t offset) const { return params_.data() + offset; }
  float* g(int64_t offset) { return grads_.data() + offset; }

  TrainShape shape_;
  std::vector<ParamTensor> tensors_;
  std::vector<float> params_, grads_;
  int64_t embd_ = 0, out_norm_ = 0, output_ = 0;
  std::vector<LayerOffsets> layer_;

  int batch_ = 0, seq_ = 0;
  std::vector<int32_t> tokens_;
  std::vector<LayerActs> acts_;
  std::vector<float> x_final_, xn_final_, r_final_, logits_;
  std::vector<float> dx_, dxn_, datt_, dq_, dk_, dv_, dh_, dg_, du_;
};

}  // namespace rapide::train
