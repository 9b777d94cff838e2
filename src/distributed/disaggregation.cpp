// Prefill/decode disaggregation over MPI (distributed/disaggregation.h).
//
// Idle ranks wait with MPI_Iprobe and a growing sleep (up to 1 ms), as tensor-parallel
// followers do: a blocking probe busy-polls a core the other rank may need.
#include "distributed/disaggregation.h"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <list>
#include <string>
#include <thread>
#include <vector>

#include "base/clock.h"
#include "base/error.h"
#include "base/logging.h"
#include "distributed/kv_transfer_wire.h"
#include "distributed/mpi_error.h"
#include "distributed/parallel_job.h"
#include "engine/prefill_router.h"
#include "engine/prefill_worker.h"

namespace rapide {

namespace {

// Tags of our own (pipeline parallelism uses 1 and 2 on the same communicator).
constexpr int kPromptTag = 21;  // rank 0 -> a prefill rank: a prefill request
constexpr int kKvTag = 22;      // a prefill rank -> 0: a KV frame
constexpr int kStopTag = 23;    // rank 0 -> a prefill rank: no more prompts
constexpr int kByeTag = 24;     // a prefill rank -> 0: everything sent, leaving
constexpr int kDecodeRank = 0;  // ranks 1 .. size-1 are prefill ranks
// How long rank 0 waits, at shutdown, for the prefill ranks' last frames and goodbyes.
constexpr auto kShutdownWait = std::chrono::seconds(60);

void check(int rc, const char* call) {
  check_mpi(rc, "disaggregation", call);
}

// Sleeps a little longer each time nothing came (1 us .. 1 ms), reset when something did.
class Backoff {
 public:
  void wait() {
    std::this_thread::sleep_for(pause_);
    pause_ = std::min(pause_ * 2, std::chrono::microseconds(1000));
  }
  void reset() { pause_ = std::chrono::microseconds(1); }

 private:
  std::chrono::microseconds pause_{1};
};

// Whether a message from `source` is waiting (its envelope in `status`); when none is, waits
// one backoff step first, so a polling loop can simply `continue`.
bool probe(int source, MPI_Status& status, Backoff& backoff) {
  int there = 0;
  check(MPI_Iprobe(source, MPI_ANY_TAG, MPI_COMM_WORLD, &there, &status), "MPI_Iprobe");
  if (!there) {
    backoff.wait();
    return false;
  }
  backoff.reset();
  return true;
}

// Non-blocking sends whose buffers must live until MPI is done with them.
template <typename T>
class PendingSends {
 public:
  void send(std::vector<T> data, MPI_Datatype type, int to, int tag) {
    Pending& p = pending_.emplace_back();
    p.data = std::move(data);
    check(MPI_Isend(p.data.data(), static_cast<int>(p.data.size()), type, to, tag, MPI_COMM_WORLD,
                    &p.request),
          "MPI_Isend");
  }
  // Frees the buffers of completed sends.
  void reap() {
    for (auto it = pending_.begin(); it != pending_.end();) {
      int done = 0;
      check(MPI_Test(&it->request, &done, MPI_STATUS_IGNORE), "MPI_Test");
      it = done ? pending_.erase(it) : std::next(it);
    }
  }
  void wait_all() {
    for (Pending& p : pending_) check(MPI_Wait(&p.request, MPI_STATUS_IGNORE), "MPI_Wait");
    pending_.clear();
  }

 private:
  struct Pending {
    std::vector<T> data;
    MPI_Request request = MPI_REQUEST_NULL;
  };
  std::list<Pending> pending_;  // a list: buffers never move while MPI holds them
};

class MpiPrefillLink final : public RemotePrefill {
 public:
  explicit MpiPrefillLink(int prefill_ranks) : router_(prefill_ranks) {}

  ~MpiPrefillLink() override {
    try {
      shut_down();
    } catch (const std::exception& e) {
      spdlog::warn("disaggregation: leaving without every prefill rank's goodbye: {}", e.what());
    }
  }

  void request(RequestId id, std::span<const int32_t> tokens) override {
    sends_.reap();
    const int rank = 1 + router_.route(id, tokens.size());
    sends_.send(encode_prefill_request(id, tokens), MPI_INT32_T, rank, kPromptTag);
  }

  std::vector<PrefilledKv> poll() override {
    sends_.reap();
    std::vector<PrefilledKv> out;
    for (;;) {
      int there = 0;
      MPI_Status status;
      check(MPI_Iprobe(MPI_ANY_SOURCE, kKvTag, MPI_COMM_WORLD, &there, &status), "MPI_Iprobe");
      if (!there) break;
      std::vector<uint8_t> frame = receive_frame(status);
      try {
        out.push_back(decode_kv_frame(frame));
        out.back().transfer_seconds = last_receive_seconds_;
        out.back().prefill_rank = status.MPI_SOURCE;
        router_.answered(out.back().request_id);
      } catch (const Error& e) {
        // Its request gets no answer and fails at --disagg-timeout-ms.
        spdlog::error("disaggregation: dropped a KV frame from prefill rank {}: {}",
                      status.MPI_SOURCE, e.what());
      }
    }
    return out;
  }

 private:
  // The frame whose envelope `status` describes, received in one MPI_Recv: on shared
  // memory this is a copy at memory speed, timed as the transfer.
  std::vector<uint8_t> receive_frame(MPI_Status& status) {
    int bytes = 0;
    check(MPI_Get_count(&status, MPI_BYTE, &bytes), "MPI_Get_count");
    std::vector<uint8_t> frame(static_cast<size_t>(bytes));
    const TimePoint start = Clock::now();
    check(MPI_Recv(frame.data(), bytes, MPI_BYTE, status.MPI_SOURCE, status.MPI_TAG, MPI_COMM_WORLD,
                   MPI_STATUS_IGNORE),
          "MPI_Recv (KV frame)");
    last_receive_seconds_ = seconds_between(start, Clock::now());
    return frame;
  }

  void shut_down() {
    sends_.wait_all();  // a prefill rank receives prompts in order, the stop after them
    const int ranks = router_.ranks();
    for (int r = 1; r <= ranks; ++r) {
      check(MPI_Send(nullptr, 0, MPI_INT32_T, r, kStopTag, MPI_COMM_WORLD), "MPI_Send (stop)");
    }
    for (int r = 0; r < ranks; ++r) {
      const PrefillRankLoad& l = router_.loads()[static_cast<size_t>(r)];
      spdlog::info("router: prefill rank {} was given {} prompts ({} tokens)", r + 1,
                   l.routed_prompts, l.routed_tokens);
    }
    // Frames of requests that ended meanwhile, then the goodbyes: after them no message of a
    // prefill rank is left in flight, so MPI_Finalize does not wait for one.
    const TimePoint deadline = Clock::now() + kShutdownWait;
    Backoff backoff;
    int goodbyes = 0;
    while (goodbyes < ranks && Clock::now() < deadline) {
      MPI_Status status;
      if (!probe(MPI_ANY_SOURCE, status, backoff)) continue;
      if (status.MPI_TAG == kByeTag) {
        check(MPI_Recv(nullptr, 0, MPI_INT32_T, status.MPI_SOURCE, kByeTag, MPI_COMM_WORLD,
                       MPI_STATUS_IGNORE),
              "MPI_Recv (goodbye)");
        ++goodbyes;
        continue;
      }
      receive_frame(status);  // unwanted now
    }
    if (goodbyes < ranks) {
      spdlog::warn("disaggregation: {} of {} prefill ranks said goodbye within {} s", goodbyes,
                   ranks, std::chrono::duration_cast<std::chrono::seconds>(kShutdownWait).count());
    }
  }

  PendingSends<int32_t> sends_;
  PrefillRouter router_;
  double last_receive_seconds_ = 0;
};

}  // namespace

DisaggRole join_disaggregated_job(const std::string& role) {
  const int rank = parallel_job_rank();  // starts MPI, errors returned (not fatal)
  int ranks = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  if (ranks < 2) {
    fail(ErrorCode::kInvalidArgument,
         "--disaggregate needs at least 2 MPI ranks (rank 0: router + decode, ranks 1..N: "
         "prefill), this job has {} (launch with mpirun -np 2 rapide-mpi ..., or -np N+1 for N "
         "prefill ranks)",
         ranks);
  }
  // Every rank checks every rank's --role, so a mismatch on one fails all of them alike (a
  // rank failing alone would leave the other waiting for it, and MPI_Finalize for both).
  static const std::vector<std::string> kRoles = {"auto", "router", "decode", "prefill"};
  const int code = static_cast<int>(std::find(kRoles.begin(), kRoles.end(), role) - kRoles.begin());
  std::vector<int> codes(static_cast<size_t>(ranks));
  check(MPI_Allgather(&code, 1, MPI_INT, codes.data(), 1, MPI_INT, MPI_COMM_WORLD),
        "MPI_Allgather (roles)");
  for (int r = 0; r < ranks; ++r) {
    const std::string asked = codes[r] < static_cast<int>(kRoles.size()) ? kRoles[codes[r]] : "?";
    const bool fits = asked == "auto" ||
                      (r == kDecodeRank && (asked == "router" || asked == "decode")) ||
                      (r != kDecodeRank && asked == "prefill");
    if (!fits) {
      fail(ErrorCode::kInvalidArgument,
           "--role {} on rank {}: rank 0 is the router and decode engine (router, decode), ranks "
           "1..N the prefill ranks (prefill); use --role auto",
           asked, r);
    }
  }
  return rank == kDecodeRank ? DisaggRole::kRouterDecode : DisaggRole::kPrefill;
}

void abort_disaggregated_job(const std::exception& error) {
  const Error* e = dynamic_cast<const Error*>(&error);
  const int status = e != nullptr && e->code() == ErrorCode::kInvalidArgument ? 2 : 1;
  spdlog::error("disaggregated job, rank {}: {}; ending the job", parallel_job_rank(),
                error.what());
  MPI_Abort(MPI_COMM_WORLD, status);
  std::exit(status);  // MPI_Abort does not return; this is for the compiler
}

std::unique_ptr<RemotePrefill> connect_prefill_ranks() {
  int ranks = 0;
  check(MPI_Comm_size(MPI_COMM_WORLD, &ranks), "MPI_Comm_size");
  return std::make_unique<MpiPrefillLink>(ranks - 1);
}

void serve_prefill_rank(Model& model, const EngineOptions& options) {
  PrefillWorker worker(model, options);
  const int rank = parallel_job_rank();
  spdlog::info("prefill rank {}: computing prompts for rank {} ({} threads, blocks of {} tokens)",
               rank, kDecodeRank, options.threads, worker.block_size());
  PendingSends<uint8_t> sends;
  Backoff backoff;
  std::vector<int32_t> words, tokens;
  uint64_t prompts = 0, blocks = 0, bytes = 0;
  double compute_seconds = 0;
  for (;;) {
    sends.reap();
    MPI_Status status;
    if (!probe(kDecodeRank, status, backoff)) continue;
    int count = 0;
    check(MPI_Get_count(&status, MPI_INT32_T, &count), "MPI_Get_count");
    words.resize(static_cast<size_t>(count));
    check(MPI_Recv(words.data(), count, MPI_INT32_T, kDecodeRank, status.MPI_TAG, MPI_COMM_WORLD,
                   MPI_STATUS_IGNORE),
          "MPI_Recv (prompt)");
    if (status.MPI_TAG == kStopTag) break;
    if (status.MPI_TAG != kPromptTag) continue;
    const RequestId id = decode_prefill_request(words, tokens);
    PrefilledKv kv = worker.prefill(id, tokens);
    std::vector<uint8_t> frame = encode_kv_frame(kv);
    if (frame.size() > static_cast<size_t>(INT_MAX)) {  // one MPI message counts in int
      kv.hashes.clear();
      kv.blocks.clear();
      kv.error = "the prompt's K/V exceed one MPI message (2 GiB)";
      frame = encode_kv_frame(kv);
    }
    ++prompts;
    blocks += kv.hashes.size();
    bytes += frame.size();
    compute_seconds += kv.prefill_seconds;
    // Non-blocking: the next prompt is computed while this frame travels.
    sends.send(std::move(frame), MPI_BYTE, kDecodeRank, kKvTag);
  }
  sends.send({}, MPI_BYTE, kDecodeRank, kByeTag);
  sends.wait_all();
  spdlog::info("prefill rank {}: {} prompts, {} KV blocks ({:.1f} MiB) sent, {:.3f} s computing",
               rank, prompts, blocks, bytes / 1048576.0, compute_seconds);
}

}  // namespace rapide
