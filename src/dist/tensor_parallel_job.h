// A tensor-parallel job: this process's place in `mpirun -np N rapide ... --tp N`.
//
// Rank 0 (the leader) runs the command as usual (scheduler, HTTP front end, sampling); its
// model calls the job's collectives inside every forward pass and, first, publishes the
// pass as plain data (the flat batch and the block tables of its sequences). Every other
// rank (a follower) loads only its shard, then serve_followers() replays each published
// pass on its own KV shard until the leader ends the job. Nothing but MPI moves data:
// MPI_Bcast for passes, MPI_Allreduce for partial sums, MPI_Gatherv for logits.
//
// Builds without MPI (RAPIDE_MPI off) keep the interface: join_tensor_parallel() refuses
// --tp > 1 with kUnsupported.
#pragma once

#include <memory>

#include "base/thread_pool.h"
#include "model/model.h"
#include "model/tensor_parallel.h"

namespace rapide {

class TensorParallelJob {
 public:
  virtual ~TensorParallelJob() = default;
  virtual TensorParallel& group() = 0;
  bool leader() { return group().rank() == 0; }
  // Follower ranks: runs every pass the leader publishes, on `model` (built with group())
  // and a KV shard of its own, until the leader's job ends. Throws Error(kUnavailable) when
  // MPI reports a failure.
  virtual void serve_followers(Model& model, ThreadPool& pool) = 0;
  // Leader: the passes published so far and the seconds spent in collectives (figures for
  // benchmarks and logs).
  virtual uint64_t passes() const = 0;
  virtual double communication_seconds() const = 0;
};

// Initialises MPI (once per process) and checks that the job has exactly `size` ranks.
// Throws Error(kInvalidArgument) when it does not, kUnsupported in a build without MPI.
std::unique_ptr<TensorParallelJob> join_tensor_parallel(int size);

}  // namespace rapide
