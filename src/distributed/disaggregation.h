// Prefill/decode disaggregation over Open MPI (issue 21):
//
//   mpirun -np 2 rapide-mpi serve -m model.gguf --disaggregate -t 1   # one prefill rank
//   mpirun -np 4 rapide-mpi serve -m model.gguf --disaggregate -t 1   # three
//
// Rank 0 is the router and the decode engine: the HTTP front end (the OpenAI API unchanged),
// the scheduler and the token streams. Ranks 1..N are prefill ranks: each computes the K/V of
// the full blocks of each prompt rank 0 sends it and sends them back with their block hashes;
// rank 0's engine adopts them into its prefix cache (engine/remote_prefill.h). Rank 0 sends
// each prompt to the prefill rank with the fewest prompt tokens outstanding
// (engine/prefill_router.h). Messages
// (distributed/kv_transfer_wire.h) move with MPI point-to-point: MPI_Isend of the prompt's tokens,
// MPI_Isend of the KV frame (the prefill rank goes on with the next prompt while it travels),
// and on rank 0, from the engine loop, MPI_Iprobe, then MPI_Recv of a frame whose envelope
// is there. Nothing goes through files.
//
// Errors: MPI calls return their errors (MPI_ERRORS_RETURN, set when MPI starts) and become
// Error(kUnavailable); a rank that dies is reported by mpirun, which ends the job; a prefill
// rank that stops answering makes rank 0's requests fail after --disagg-timeout-ms.
//
// The one-process runtime, linked into `rapide` (src/distributed/CMakeLists.txt), keeps the
// interface and refuses with kUnsupported, naming rapide-mpi.
#pragma once

#include <exception>
#include <memory>
#include <string>

#include "engine/engine_options.h"
#include "engine/remote_prefill.h"
#include "model/model.h"

namespace rapide {

enum class DisaggRole {
  kRouterDecode,  // rank 0: HTTP front end, scheduler, decode engine
  kPrefill,       // ranks 1..N: compute prompts' K/V
};

// Starts MPI and checks the job: at least 2 ranks, and `role` ("auto", or "router" / "decode"
// on rank 0 and "prefill" on the others) matching this rank. Returns this rank's role. Throws
// Error(kInvalidArgument) naming the problem, kUnsupported in a build without MPI.
DisaggRole join_disaggregated_job(const std::string& role);

// After join_disaggregated_job, a rank whose command fails ends the whole job: logs `error`
// and calls MPI_Abort (exit status 2 for kInvalidArgument, 1 otherwise). Returning normally
// instead would leave the other rank waiting for it, and MPI_Finalize waiting for both.
[[noreturn]] void abort_disaggregated_job(const std::exception& error);

// Rank 0: the link to the prefill ranks (every other rank of the job), routing each prompt
// by load. Its destructor tells them to stop, logs how many prompts each was given and
// collects what they still send, so every rank leaves MPI cleanly.
std::unique_ptr<RemotePrefill> connect_prefill_ranks();

// Ranks 1..N: compute the prompts rank 0 sends (engine/prefill_worker.h) until it says stop.
// Throws Error(kUnavailable) when MPI reports a failure.
void serve_prefill_rank(Model& model, const EngineOptions& options);

}  // namespace rapide
