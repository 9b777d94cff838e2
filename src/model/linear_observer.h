// A read-only view of the inputs of a model's linear layers during forward(), for
// calibration (rapide quantize --method awq|gptq, --imatrix-out, --smooth): the statistics
// those methods need are functions of what each weight matrix multiplies.
//
// The observer sees each input once per forward() and per layer, before the product, so
// matrices that read the same input (q/k/v, gate/up) are one observation. It must not keep
// the pointer: the buffer is the model's scratch and is overwritten by the next step.
#pragma once

#include <cstdint>

namespace rapide {

// Which input of a layer: the matrices that read it are listed in linear_input_tensors().
enum class LinearInput {
  kAttnIn,   // attn_norm output: attn_q, attn_k, attn_v
  kAttnOut,  // attention output: attn_output
  kFfnIn,    // ffn_norm output: ffn_gate, ffn_up (dense FFN only)
  kFfnDown,  // silu(gate) * up: ffn_down (dense FFN only)
  kOutput,   // output_norm output: the output head (layer -1)
};

class LinearObserver {
 public:
  virtual ~LinearObserver() = default;
  // n rows of `cols` floats, row-major. `layer` is the block index, -1 for kOutput.
  virtual void observe(int layer, LinearInput input, const float* x, int64_t n, int64_t cols) = 0;
};

}  // namespace rapide
