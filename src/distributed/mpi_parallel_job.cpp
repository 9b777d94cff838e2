// ParallelJob over Open MPI (distributed/parallel_job.h): tensor parallelism, pipeline
// parallelism, or both (each pipeline stage split over --tp ranks), over MPI_COMM_WORLD.
//
// Errors: MPI_COMM_WORLD's handler is MPI_ERRORS_RETURN, so a failed call becomes an
// Error(kUnavailable) naming the call instead of an abort deep inside the library; a rank
// that dies is reported by mpirun, which then ends the whole job.
//
// Idle followers wait for the next pass with MPI_Ibcast + MPI_Test and a growing sleep
// (up to 1 ms): a blocking MPI_Bcast busy-polls a core, which on a machine whose cores are
// all ranks would steal the leader's CPU while the server is idle.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <string>
#include <thread>

#include "base/clock.h"
#include "base/error.h"
#include "base/logging.h"
#include "distributed/mpi_error.h"
#include "distributed/parallel_job.h"
#include "engine/batch_plan.h"
#include "engine/model_identity.h"
#include "engine/plan_broadcast.h"
#include "engine/plan_worker.h"

namespace rapide {

namespace {

void check(int rc, const char* call) {
  check_mpi(rc, "MPI job", call);
}

// The size in bytes of the next pass's plan (0: the job ends). Followers wait for it with
// MPI_Ibcast, and a non-blocking collective only matches a non-blocking one, so the leader sends it
// the same way.
int broadcast_pass_size(int32_t bytes) {
  MPI_Request request;
  int rc = MPI_Ibcast(&bytes, 1, MPI_INT32_T, 0, MPI_COMM_WORLD, &request);
  if (rc == MPI_SUCCESS) rc = MPI_Wait(&request, MPI_STATUS_IGNORE);
  return rc;
}

// The leader's end of a job: an empty pass tells the followers to leave their loop. Sent by
// the job's destructor, or at exit when the command left without unwinding (exit()).
void release_followers() {
  broadcast_pass_size(0);
}
const void* live_leader = nullptr;

// MPI_Init_thread once per process, MPI_Finalize at exit. SERIALIZED: the leader calls MPI
// from its engine thread while the main thread waits, never two threads at once.
class MpiRuntime {
 public:
  static MpiRuntime& get() {
    static MpiRuntime runtime;
    return runtime;
  }
  ~MpiRuntime() {
    if (live_leader != nullptr) release_followers();
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Finalize();
  }

 private:
  MpiRuntime() {
    int provided = 0;
    check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided), "MPI_Init_thread");
    if (provided < MPI_THREAD_SERIALIZED) {
      fail(ErrorCode::kUnsupported,
           "tensor parallelism: this MPI library does not allow calls from the engine thread "
           "(MPI_THREAD_SERIALIZED)");
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  }
};

// World rank w of a --tp T --pp P job is tensor rank w % T of pipeline stage w / T: stage 0
// holds ranks 0..T-1 and rank 0 leads. Each stage's T ranks share a communicator of their own
// (MPI_Comm_split) for the all-reduces and the logits gather; activations go from rank w to
// w + T (the same tensor rank of the next stage: every tensor rank holds the whole hidden
// state after its all-reduce), and the last stage's tensor rank 0 sends the outputs to rank 0.
class MpiJob : public ParallelJob, public PipelineParallel {
 public:
  MpiJob(int tp, int pp, int micro_batches) : tp_(tp), pp_(pp), micro_batches_(micro_batches) {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    stage_ = rank_ / tp_;
    if (tp_ > 1) tensor_ = std::make_unique<TensorGroup>(*this);
    if (rank_ == 0) live_leader = this;
  }
  ~MpiJob() override {
    if (rank_ == 0) {
      release_followers();
      live_leader = nullptr;
    }
  }

  TensorParallel* tensor_parallel() override { return tensor_.get(); }
  PipelineParallel* pipeline_parallel() override { return pp_ > 1 ? this : nullptr; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int stage() const override { return stage_; }
  int stages() const override { return pp_; }
  uint64_t passes() const override { return passes_; }
  uint64_t plan_bytes() const override { return plan_bytes_; }
  double communication_seconds() const override { return comm_seconds_; }
  double idle_fraction() const override {
    return pass_seconds_ > 0.0 ? wait_seconds_ / pass_seconds_ : 0.0;
  }

  // The leader publishes the plan the engine staged for this pass (ModelRunner), or one made
  // from the batch for a pass no scheduler planned (perplexity, pruning, calibration).
  void begin_forward(const Batch& batch, const KvStore& kv, bool hidden_only) override {
    pass_start_ = Clock::now();
    if (rank_ != 0) return;
    const TimePoint start = Clock::now();
    std::vector<uint8_t> bytes = std::move(staged_plan_);
    staged_plan_.clear();
    if (bytes.empty()) {
      BroadcastHeader header;
      header.kv_block_size = kv.layout().block_size;
      header.kv_type = kv.layout().type;
      header.hidden_only = hidden_only;
      bytes = encode_plan_broadcast(header, plan_for_batch(batch, kv));
    }
    const int32_t count = static_cast<int32_t>(bytes.size());
    check(broadcast_pass_size(count), "MPI_Ibcast (plan size)");
    check(MPI_Bcast(bytes.data(), count, MPI_BYTE, 0, MPI_COMM_WORLD), "MPI_Bcast (plan)");
    ++passes_;
    plan_bytes_ += bytes.size();
    comm_seconds_ += seconds_between(start, Clock::now());
  }

  void stage_plan(std::vector<uint8_t> encoded) override { staged_plan_ = std::move(encoded); }

  int micro_batches(int n_tokens) const override {
    return std::min(n_tokens, micro_batches_ > 0 ? micro_batches_ : pp_);
  }
  void send_next(const float* data, size_t count) override { send(data, count, rank_ + tp_, 1); }
  void receive_previous(float* data, size_t count) override {
    receive(data, count, rank_ - tp_, 1);
  }
  void send_output(const float* data, size_t count) override { send(data, count, 0, 2); }
  void receive_output(float* data, size_t count) override {
    receive(data, count, (pp_ - 1) * tp_, 2);
  }
  void end_forward() override {
    const TimePoint start = Clock::now();
    if (!sends_.empty()) {
      check(MPI_Waitall(static_cast<int>(sends_.size()), sends_.data(), MPI_STATUSES_IGNORE),
            "MPI_Waitall");
    }
    sends_.clear();
    send_buffers_.clear();
    const TimePoint end = Clock::now();
    comm_seconds_ += seconds_between(start, end);
    wait_seconds_ += seconds_between(start, end);
    pass_seconds_ += seconds_between(pass_start_, end);
  }

  // Each pass's plan runs as PlanWorker runs a recorded one: its KV ops on this rank's
  // memory (its shard of every block, its own offload tier: kv/offload_tier.h's
  // mirror_tier_options of the leader's), then the forward pass over the plan's block tables.
  // The layout is this rank's heads and layers cut in the leader's blocks.
  void serve_followers(Model& model, ThreadPool& pool) override {
    std::unique_ptr<PlanWorker> worker;
    BroadcastHeader first;
    std::vector<uint8_t> bytes;
    for (;;) {
      const int32_t count = wait_for_pass_size();
      if (count == 0) break;
      bytes.resize(static_cast<size_t>(count));
      check(MPI_Bcast(bytes.data(), count, MPI_BYTE, 0, MPI_COMM_WORLD), "MPI_Bcast (plan)");
      PlanBroadcast pass = decode_plan_broadcast(bytes);
      if (!worker) {
        first = pass.header;
        worker = std::make_unique<PlanWorker>(
            model, KvLayout::for_model(model.config(), first.kv_block_size, first.kv_type), pool);
      } else if (pass.header.kv_block_size != first.kv_block_size ||
                 pass.header.kv_type != first.kv_type) {
        fail(ErrorCode::kCorrupt,
             "rank {}: a pass with KV blocks of {} positions after passes with {} (one job has "
             "one KV layout)",
             rank_, pass.header.kv_block_size, first.kv_block_size);
      }
      if (pass.header.tier) {
        const KvLayout& layout = worker->kv().layout();
        worker->set_tier(std::make_unique<OffloadTier>(
            mirror_tier_options(*pass.header.tier, rank_), layout, model_identity(model, layout)));
      }
      worker->execute(pass.plan, pass.header.hidden_only);
      ++passes_;
      plan_bytes_ += bytes.size();
    }
    spdlog::info(
        "{} rank {}: {} passes ({:.1f} KiB of plans), {:.3f} s in MPI calls, idle {:.1f} % of "
        "pass time, {:.1f} MiB of KV held",
        kind(), rank_, passes_, plan_bytes_ / 1024.0, comm_seconds_, 100.0 * idle_fraction(),
        worker ? worker->kv().resident_bytes() / 1048576.0 : 0.0);
  }

 private:
  // This stage's tensor-parallel group. A class of its own: its rank and size are the
  // stage's, ParallelJob's are the job's.
  class TensorGroup : public TensorParallel {
   public:
    explicit TensorGroup(MpiJob& job) : job_(job) {
      check(MPI_Comm_split(MPI_COMM_WORLD, job.stage_, job.rank_ % job.tp_, &comm_),
            "MPI_Comm_split");
      MPI_Comm_rank(comm_, &rank_);
      MPI_Comm_size(comm_, &size_);
    }
    // The communicator is not freed: MPI_Comm_free is collective and followers leave with
    // exit(); MPI_Finalize releases it.
    int rank() const override { return rank_; }
    int size() const override { return size_; }
    void begin_forward(const Batch& batch, const KvStore& kv, bool hidden_only) override {
      job_.begin_forward(batch, kv, hidden_only);
    }
    void stage_plan(std::vector<uint8_t> encoded) override { job_.stage_plan(std::move(encoded)); }

    void all_reduce_sum(float* data, size_t count) override {
      const TimePoint start = Clock::now();
      check(MPI_Allreduce(MPI_IN_PLACE, data, static_cast<int>(count), MPI_FLOAT, MPI_SUM, comm_),
            "MPI_Allreduce");
      job_.comm_seconds_ += seconds_between(start, Clock::now());
    }

    void gather_columns(const float* local, int rows, int64_t total, float* out) override {
      const TimePoint start = Clock::now();
      std::vector<int> counts(size_), offsets(size_);
      for (int r = 0; r < size_; ++r) {
        const SliceRange s = slice_range(total, size_, r);
        counts[r] = static_cast<int>(rows * s.size());
        offsets[r] = static_cast<int>(rows * s.begin);
      }
      // Rank-major on arrival ([rank][row][its columns]), then interleaved into whole rows.
      if (rank_ == 0) gathered_.resize(static_cast<size_t>(rows) * total);
      check(MPI_Gatherv(local, counts[rank_], MPI_FLOAT, gathered_.data(), counts.data(),
                        offsets.data(), MPI_FLOAT, 0, comm_),
            "MPI_Gatherv");
      if (rank_ == 0) {
        for (int r = 0; r < size_; ++r) {
          const SliceRange s = slice_range(total, size_, r);
          for (int row = 0; row < rows; ++row) {
            std::copy_n(gathered_.data() + offsets[r] + row * s.size(), s.size(),
                        out + row * total + s.begin);
          }
        }
      }
      job_.comm_seconds_ += seconds_between(start, Clock::now());
    }

   private:
    MpiJob& job_;
    MPI_Comm comm_ = MPI_COMM_NULL;
    int rank_ = 0;
    int size_ = 1;
    std::vector<float> gathered_;
  };

  const char* kind() const {
    return tp_ > 1 && pp_ > 1 ? "tensor x pipeline" : pp_ > 1 ? "pipeline" : "tensor-parallel";
  }

 private:
  // Non-blocking: the copy stays in send_buffers_ until end_forward() has waited for it, so
  // a stage goes on with its next micro-batch while the data travels.
  void send(const float* data, size_t count, int to, int tag) {
    const TimePoint start = Clock::now();
    send_buffers_.emplace_back(data, data + count);
    sends_.emplace_back();
    check(MPI_Isend(send_buffers_.back().data(), static_cast<int>(count), MPI_FLOAT, to, tag,
                    MPI_COMM_WORLD, &sends_.back()),
          "MPI_Isend");
    comm_seconds_ += seconds_between(start, Clock::now());
  }
  void receive(float* data, size_t count, int from, int tag) {
    const TimePoint start = Clock::now();
    check(MPI_Recv(data, static_cast<int>(count), MPI_FLOAT, from, tag, MPI_COMM_WORLD,
                   MPI_STATUS_IGNORE),
          "MPI_Recv");
    const double waited = seconds_between(start, Clock::now());
    comm_seconds_ += waited;
    wait_seconds_ += waited;
  }

  int32_t wait_for_pass_size() {
    int32_t count = 0;
    MPI_Request request;
    check(MPI_Ibcast(&count, 1, MPI_INT32_T, 0, MPI_COMM_WORLD, &request), "MPI_Ibcast");
    auto pause = std::chrono::microseconds(1);
    for (;;) {
      int done = 0;
      check(MPI_Test(&request, &done, MPI_STATUS_IGNORE), "MPI_Test");
      if (done) return count;
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::microseconds(1000));
    }
  }

  int tp_ = 1;
  int pp_ = 1;
  int micro_batches_ = 0;
  int rank_ = 0;
  int size_ = 1;
  int stage_ = 0;
  std::unique_ptr<TensorGroup> tensor_;
  std::deque<std::vector<float>> send_buffers_;
  std::vector<MPI_Request> sends_;
  TimePoint pass_start_;
  double wait_seconds_ = 0.0;
  double pass_seconds_ = 0.0;
  uint64_t passes_ = 0;
  double comm_seconds_ = 0.0;
  std::vector<uint8_t> staged_plan_;  // the leader's next pass publishes it
  uint64_t plan_bytes_ = 0;           // plans sent (leader) or received (followers)
};

}  // namespace

int parallel_job_rank() {
  MpiRuntime::get();
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

int parallel_job_size() {
  MpiRuntime::get();
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

std::string parallel_runtime() {
  // Allowed before MPI_Init: --version starts no MPI. Open MPI's line goes on with the
  // package and repository; the name and version are what identify the library.
  char text[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int length = 0;
  MPI_Get_library_version(text, &length);
  const std::string version(text, static_cast<size_t>(std::max(length, 0)));
  return version.substr(0, version.find_first_of(",\n"));
}

const char* program_name() {
  return "rapide-mpi";
}

std::unique_ptr<ParallelJob> join_parallel_job(int tp, int pp, int micro_batches) {
  MpiRuntime::get();
  tp = std::max(tp, 1);
  pp = std::max(pp, 1);
  const int size = tp * pp;
  const std::string flags = tp > 1 && pp > 1 ? fmt::format("--tp {} --pp {}", tp, pp)
                            : pp > 1         ? fmt::format("--pp {}", pp)
                                             : fmt::format("--tp {}", tp);
  int ranks = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  if (ranks != size) {  // before the job exists: no rank waits for a stop message
    fail(ErrorCode::kInvalidArgument,
         "{} needs exactly {} MPI ranks, this job has {} (launch with mpirun -np {} rapide-mpi "
         "...)",
         flags, size, ranks, size);
  }
  return std::make_unique<MpiJob>(tp, pp, micro_batches);
}

}  // namespace rapide
