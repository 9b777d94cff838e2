// A tensor- or pipeline-parallel job: this process's place in
// `mpirun -np N rapide-mpi ... --tp N` (or --pp N).
//
// Rank 0 (the leader) runs the command as usual (scheduler, HTTP front end, sampling); its
// model calls the job's collectives inside every forward pass and, first, publishes the
// step plan the pass runs (engine/plan_broadcast.h: the engine's own StepPlan, or one made
// from the batch for a pass no scheduler planned). Every other rank (a follower) loads only
// its shard, then serve_followers() runs each published plan as a PlanWorker does — its KV
// ops on this rank's memory, then the pass — until the leader ends the job. Nothing but MPI
// moves data: MPI_Bcast for plans, MPI_Allreduce for partial sums, MPI_Gatherv for logits; with
// --pp, MPI_Isend / MPI_Recv of each micro-batch's activations between neighbouring stages and of
// the last stage's outputs back to stage 0.
//
// Two runtimes implement the functions below and each executable links one
// (src/distributed/CMakeLists.txt): Open MPI's in `rapide-mpi`, and in `rapide` a one-process one
// whose join_parallel_job() refuses --tp / --pp > 1 with kUnsupported, naming rapide-mpi.
#pragma once

#include <memory>
#include <string>

#include "base/thread_pool.h"
#include "model/model.h"
#include "model/pipeline_parallel.h"
#include "model/tensor_parallel.h"

namespace rapide {

class ParallelJob {
 public:
  virtual ~ParallelJob() = default;
  // What the model is built with: the tensor-parallel group (--tp) or the pipeline (--pp);
  // the other is nullptr.
  virtual TensorParallel* tensor_parallel() = 0;
  virtual PipelineParallel* pipeline_parallel() = 0;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  bool leader() const { return rank() == 0; }
  // Follower ranks: runs every pass the leader publishes, on `model` (built with this job's
  // tensor_parallel() or pipeline_parallel()) and a KV shard of its own, until the leader's
  // job ends. Throws Error(kUnavailable) when MPI reports a failure.
  virtual void serve_followers(Model& model, ThreadPool& pool) = 0;
  // Figures for benchmarks and logs, for this rank: passes run, seconds in MPI calls (for a
  // receive, including the wait for the sender), and for pipelines the idle fraction: the
  // share of forward-pass time spent waiting for another stage (the bubble, plus transfers).
  virtual uint64_t passes() const = 0;
  // Bytes of encoded plans this rank sent (leader) or received (followers).
  virtual uint64_t plan_bytes() const = 0;
  virtual double communication_seconds() const = 0;
  virtual double idle_fraction() const = 0;
};

// Initialises MPI (once per process) and checks that the job has exactly tp x pp ranks (one
// of them 1). Throws Error(kInvalidArgument) when it does not, kUnsupported in the one-process
// runtime. `micro_batches`: how many micro-batches a pipelined pass is cut into (0: pp).
std::unique_ptr<ParallelJob> join_parallel_job(int tp, int pp, int micro_batches = 0);

// This process's rank in the MPI job (initialising MPI); 0 in the one-process runtime.
int parallel_job_rank();
// How many ranks the MPI job has (initialising MPI); 1 in the one-process runtime.
int parallel_job_size();

// What runs the ranks, for `--version`: the MPI library's own name and version (without
// initialising MPI) in rapide-mpi; "none: ..." in the one-process rapide.
std::string parallel_runtime();

// The binary's name for usage and help text: "rapide-mpi" with the MPI runtime, "rapide"
// with the one-process one.
const char* program_name();

}  // namespace rapide
