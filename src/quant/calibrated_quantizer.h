// The calibrated half of `rapide quantize` (--method awq|gptq, --calibration, --imatrix,
// --imatrix-out, --smooth): runs the float model over the calibration tokens, layer by
// layer, and returns the tensors whose bytes differ from plain round-to-nearest: every
// matrix of a dense Llama-family block and the output head, in the type the plan chose for
// it, plus the norm (and matrix) weights that absorbed channel scales. The caller writes
// them into an otherwise unchanged GGUF, so the file keeps exactly the layout of T.
//
// Memory: statistics are gathered for one layer at a time (one calibration pass per layer,
// the observer keeping only that layer's inputs), so the peak is one layer's Hessians
// (dim^2 + q_dim^2 + ffn_dim^2 floats), not the model's.
//
// Order within a layer: SmoothQuant scales (if asked) are folded first and the statistics
// rescaled to match; AWQ then searches its scales on the smoothed weights (for --method awq,
// and for gptq unless awq_before_gptq is off: the scales take the outlier channels off the
// 4-bit grid's extremes, then GPTQ compensates what rounding is left; on stories260K Q4_0
// this moves GPTQ from 37 % to 44 % of round-to-nearest's perplexity increase removed);
// finally each matrix is quantized: GPTQ with its (scaled) input's H, or round-to-nearest (weighted by the
// importance vector when one is given or, for AWQ's matrices that cannot be scaled, taken
// from the calibration). Scales that cannot be folded exactly are not used: the output head
// of a tied-embedding model (its columns are also the embeddings), and v -> o with biases.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "formats/model_file.h"
#include "formats/quant_plan.h"
#include "quant/imatrix.h"

namespace rapide::quant {

enum class CalibrationMethod { kRtn, kAwq, kGptq };

struct CalibrationOptions {
  CalibrationMethod method = CalibrationMethod::kRtn;
  float smooth_alpha = -1.0f;        // < 0: no SmoothQuant
  std::vector<int32_t> tokens;       // calibration text, BOS first; empty: none
  int chunk = 512;                   // tokens per forward pass (each chunk restarts at position 0)
  const Imatrix* imatrix = nullptr;  // --imatrix: importance of each matrix's input channels
  bool awq_before_gptq = true;       // gptq: fold AWQ's channel scales first
  std::string dataset;               // recorded in the imatrix written
  // Tests: return the matrices as f32 after folding, unquantized (folding alone must leave
  // the float model's outputs unchanged).
  bool keep_float = false;
  // Called before each layer ("blk.3", 3, 5) and for the head ("output", n, n).
  std::function<void(const std::string& what, int done, int total)> progress;
};

struct ReplacedTensor {
  TensorType type;
  std::vector<uint8_t> data;
};

struct CalibrationResult {
  std::map<std::string, ReplacedTensor> tensors;
  Imatrix imatrix;  // from the calibration tokens (empty without them)
  // Per group ("blk.0.attn_in" ...), what the method did, for the summary on stderr.
  std::vector<std::string> notes;
};

// `file` must hold float (or dequantizable) weights of a dense, non-fused Llama-family model;
// throws Error(kUnsupported) otherwise, and kInvalidArgument when the method needs
// statistics that neither tokens nor imatrix provide.
CalibrationResult calibrate(std::shared_ptr<const ModelFile> file, const QuantPlan& plan,
                            const QuantModelFacts& facts, const CalibrationOptions& options,
                            ThreadPool& pool);

// The block index of "blk.N.<role>", or -1.
int layer_of(const std::string& name);

}  // namespace rapide::quant
