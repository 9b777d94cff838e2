// Prefill/decode disaggregation seen from the decode engine (issue 21): another process (the
// prefill rank) computes the K/V of a prompt's full blocks and hands them back with their
// block hashes; the engine adopts them into its prefix cache (PrefixCache::adopt) and then
// admits the request as usual, so the prefix cache hits on them and only the prompt's last
// partial block is computed here. A prefix hit computes what a miss computes, so the tokens
// equal a colocated engine's.
//
// The engine knows nothing of MPI: src/distributed/disaggregation.cpp implements RemotePrefill over
// MPI point-to-point, and tests implement it in one process. PrefilledKv is plain data, the
// payload of the wire frame (distributed/kv_transfer_wire.h).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "engine/request.h"

namespace rapide {

// The K/V of the first hashes.size() full blocks of a prompt, computed elsewhere.
struct PrefilledKv {
  RequestId request_id = 0;
  uint64_t identity = 0;  // model_identity() of the model and KV layout that computed them
  uint32_t block_bytes = 0;
  std::vector<uint64_t> hashes;  // the blocks' hashes (block_hash.h), in prompt order
  std::vector<uint8_t> blocks;   // hashes.size() * block_bytes bytes, block after block
  double prefill_seconds = 0;    // the producer's compute time
  std::string error;             // the producer failed: no blocks, this message
  // Filled by the receiving side: bytes received, how long receiving them took, and which
  // prefill rank computed them (its MPI rank; 1 when there is one).
  uint64_t wire_bytes = 0;
  int32_t prefill_rank = 1;
  double transfer_seconds = 0;
};

class RemotePrefill {
 public:
  virtual ~RemotePrefill() = default;
  // Asks for the K/V of `tokens` (whole blocks of the engine's block size) of request `id`.
  // Returns at once: the answer comes from a later poll(). Throws Error(kUnavailable) when
  // the link has failed.
  virtual void request(RequestId id, std::span<const int32_t> tokens) = 0;
  // Answers that arrived since the last call, in arrival order; does not wait for more.
  // Throws Error(kUnavailable) when the link has failed.
  virtual std::vector<PrefilledKv> poll() = 0;
};

}  // namespace rapide
