// Tensor parallelism as the model sees it (Megatron-LM's sharding): which slice of every
// weight this rank holds, and the collectives the forward pass calls. The model knows
// nothing of MPI; src/distributed implements the collectives over Open MPI, and tests can run the
// same sharded model against an in-process group.
//
// With `size` ranks, rank r holds:
//   Q/K/V        rows of its heads: q heads [r*H/size, (r+1)*H/size), kv heads likewise
//                (column-parallel; GQA's head grouping survives because both divide)
//   attn_output  the matching columns (row-parallel): a partial sum, all-reduced
//   gate/up      rows [r*F/size, (r+1)*F/size) (column-parallel)
//   ffn_down     the matching columns (row-parallel): a partial sum, all-reduced
//   token_embd   vocabulary rows vocab_range(r) (a token outside them embeds to zeros, and
//                the all-reduce after the lookup fills it in); the output head the same rows,
//                its logits gathered to the leader (vocabulary-parallel)
// so its KV cache holds only its kv heads. A split that cannot be made (heads or FFN width
// not divisible, a column cut inside a quantization block, mixture-of-experts layers) is
// refused by check_tensor_split with a message naming the reason.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "formats/model_file.h"
#include "kernels/matmul.h"

namespace rapide {

struct Batch;
class KvStore;

// [begin, end) of one rank's slice of `total` items cut into `parts` nearly equal pieces
// (the first total % parts pieces one longer).
struct SliceRange {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t size() const { return end - begin; }
};
SliceRange slice_range(int64_t total, int parts, int index);

class TensorParallel {
 public:
  virtual ~TensorParallel() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // At the start of every forward pass. The leader (rank 0) publishes what the pass runs so
  // every follower runs the same pass: the plan staged for it, or else a plan it makes from
  // the batch and the block tables of its sequences; followers call forward() from their own
  // loop and ignore this.
  virtual void begin_forward(const Batch& batch, const KvStore& kv, bool hidden_only) = 0;
  // The leader, before a forward pass that runs a step plan: the plan as the followers are
  // to receive it (encoded by the engine, engine/plan_broadcast.h; opaque to the model),
  // which the next begin_forward publishes in place of a description of the batch. Every
  // follower repeats the plan's KV ops on its shard before running the pass.
  virtual void stage_plan(std::vector<uint8_t> encoded) = 0;
  // Sum of `count` floats over all ranks, in place on every rank.
  virtual void all_reduce_sum(float* data, size_t count) = 0;
  // The leader's out[row * total + c] for every rank's rows x cols block of columns
  // (vocabulary slices in rank order, slice_range(total, size, r)). Followers pass
  // out = nullptr.
  virtual void gather_columns(const float* local, int rows, int64_t total, float* out) = 0;
};

// Throws Error(kInvalidArgument) naming the first reason `file` cannot be split over
// `size` ranks. size 1 always passes.
void check_tensor_split(const ModelFile& file, int size);

// The configuration one rank's shard computes with: heads, kv heads and FFN width divided by
// `size` (so a KV store built from it holds only this rank's kv heads); dim, layers and
// vocabulary stay whole.
ModelConfig shard_config(const ModelConfig& full, int size);

// Columns [begin, end) of a 2-D tensor as a standalone matrix (row-parallel shards):
// begin and end must fall on the type's block boundaries (check_tensor_split's job).
WeightMatrix prepare_columns(const TensorView& view, int64_t begin, int64_t end, ActQuant act);

}  // namespace rapide
