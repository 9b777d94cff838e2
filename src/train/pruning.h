// Structured pruning of a Llama-family model: scores for every FFN channel, every KV group
// of attention heads (under GQA a K/V head and the query heads that read it go together)
// and every layer, a plan that keeps the best, and the smaller dense model that results, so
// the speed gain is real on every kernel.
//
// Scores:
//  * magnitude (Wanda-style): |weight| x input norm. An FFN channel j scores
//    ||x_down[:, j]|| * ||W_down[:, j]||; a head sums the same over its columns of the
//    attention output and W_o. Input norms come from the inference engine's linear observer
//    (model/linear_observer.h) over calibration text.
//  * taylor: the first-order estimate of the loss change when the structure is removed,
//    sum |w * dL/dw| over every weight the structure owns, with the cross-entropy gradient of
//    the calibration text.
//  * layers (both): block influence (ShortGPT), the mean of 1 - cos(x_in, x_out) of the
//    residual stream across the layer over the calibration tokens.
#pragma once

#include <cstdint>
#include <vector>

#include "model/linear_observer.h"
#include "quant/input_stats.h"
#include "train/train_model.h"

namespace rapide::train {

struct StructureScores {
  std::vector<std::vector<double>> ffn;        // [layer][channel]
  std::vector<std::vector<double>> kv_groups;  // [layer][kv head]
  std::vector<double> layers;                  // [layer]
};

// Collects the input norms magnitude scores need: attention output and FFN down inputs.
class ActivationNorms final : public LinearObserver {
 public:
  explicit ActivationNorms(int layers) : attn_out_(layers), ffn_down_(layers) {}
  void observe(int layer, LinearInput input, const float* x, int64_t n, int64_t cols) override;
  const quant::InputStats& attn_out(int layer) const { return attn_out_[layer]; }
  const quant::InputStats& ffn_down(int layer) const { return ffn_down_[layer]; }

 private:
  std::vector<quant::InputStats> attn_out_, ffn_down_;
};

// Magnitude scores of FFN channels and KV groups (layers left empty).
StructureScores magnitude_scores(const TrainModel& model, const ActivationNorms& norms);
// Taylor scores from the gradients accumulated in model.grads().
StructureScores taylor_scores(const TrainModel& model);
// Adds the block influence of each layer, from the residual stream of model's last forward().
void add_block_influence(const TrainModel& model, int64_t tokens, std::vector<double>& influence);

struct PruneOptions {
  double ffn = 0.0;      // fraction of FFN channels to remove
  double heads = 0.0;    // fraction of attention heads (rounded to whole KV groups)
  int layers = 0;        // layers to remove
  int multiple_of = 32;  // kept FFN width rounded to this (so the result quantizes); 1: exact
};

struct PrunePlan {
  std::vector<int> keep_layers;                  // ascending
  std::vector<std::vector<int>> keep_ffn;        // per kept layer, ascending channels
  std::vector<std::vector<int>> keep_kv_groups;  // per kept layer, ascending
};

// Throws kInvalidArgument for fractions outside [0, 1) or removing every layer.
PrunePlan plan_pruning(const TrainShape& shape, const StructureScores& scores,
                       const PruneOptions& options);
TrainModel apply_pruning(const TrainModel& model, const PrunePlan& plan);

}  // namespace rapide::train
