// The two messages of prefill/decode disaggregation (issue 21), as plain bytes for MPI:
//
// * a prefill request, decode rank -> prefill rank: int32 words
//     [request id low 32 bits, request id high 32 bits, token ids...]
// * a KV frame, prefill rank -> decode rank: a PrefilledKv (engine/remote_prefill.h) as
//     header (52 bytes): magic "RKVT", version, request id, model identity, block count,
//                        block bytes, prefill time in microseconds, error length, checksum
//     error text, then the block hashes (8 bytes each), then the blocks' bytes.
//   The checksum (xxh3, kv/block_hash.h) covers every other byte of the frame, so a frame
//   damaged on the way is refused rather than adopted as K/V.
//
// Numbers are in the host's byte order: both ends run the same rapide on the same kind of
// machine (a frame from a different byte order fails the magic check). decode_kv_frame
// refuses (Error kInvalidArgument, naming what is wrong) truncated frames, a wrong magic or
// version, sizes that do not add up and a checksum mismatch.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/remote_prefill.h"

namespace rapide {

std::vector<int32_t> encode_prefill_request(RequestId id, std::span<const int32_t> tokens);
// Throws Error(kInvalidArgument) for fewer than the two id words.
RequestId decode_prefill_request(std::span<const int32_t> words, std::vector<int32_t>& tokens);

std::vector<uint8_t> encode_kv_frame(const PrefilledKv& kv);
// The frame's PrefilledKv; wire_bytes is set to the frame's size, transfer_seconds left 0.
PrefilledKv decode_kv_frame(std::span<const uint8_t> frame);

}  // namespace rapide
