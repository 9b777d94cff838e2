// Pipeline parallelism as the model sees it: this rank's stage (a contiguous range of
// layers) and the point-to-point moves between stages. As with tensor parallelism
// (model/tensor_parallel.h) the model knows nothing of MPI; src/distributed implements it.
//
// Stage s of S holds layers slice_range(n_layers, S, s) and only those layers' KV; stage 0
// also holds the token embedding (and is the leader: scheduler, sampling), the last stage
// the final norm and the output head. A forward pass is cut into micro-batches (consecutive
// token ranges, so a sequence's tokens stay in order on every stage): stage 0 embeds and
// runs micro-batch m + 1 while stage 1 runs micro-batch m, and so on, and the last stage
// sends each micro-batch's outputs (logits, or hidden states) back to stage 0.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace rapide {

struct Batch;
class KvStore;

class PipelineParallel {
 public:
  virtual ~PipelineParallel() = default;
  virtual int stage() const = 0;
  virtual int stages() const = 0;
  // How many micro-batches a pass of n tokens is cut into (at most n).
  virtual int micro_batches(int n_tokens) const = 0;
  // As TensorParallel::begin_forward: the leader publishes the pass to the other stages.
  virtual void begin_forward(const Batch& batch, const KvStore& kv, bool hidden_only) = 0;
  // As TensorParallel::stage_plan: every stage repeats the plan's KV ops on the blocks of
  // its own layers.
  virtual void stage_plan(std::vector<uint8_t> encoded) = 0;
  // Activations of one micro-batch to the next stage (the data is copied: the caller may
  // reuse its buffer at once) / from the previous stage, in micro-batch order.
  virtual void send_next(const float* data, size_t count) = 0;
  virtual void receive_previous(float* data, size_t count) = 0;
  // The last stage's outputs of one micro-batch to stage 0 / received there, in order.
  virtual void send_output(const float* data, size_t count) = 0;
  virtual void receive_output(float* data, size_t count) = 0;
  // After a pass: waits until every send of this rank has completed.
  virtual void end_forward() = 0;
};

}  // namespace rapide
