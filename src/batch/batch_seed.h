// The sampling seed of a batch request that gives none.
//
// The server draws a fresh random seed for such a request; a batch cannot, because a run
// that is killed and resumed must produce the same output for the lines it redoes. So the
// seed is a pure function of the custom_id (unique within a batch):
//
//   seed = splitmix64(fnv1a64(custom_id bytes))
//
// FNV-1a 64 (offset basis 0xcbf29ce484222325, prime 0x100000001b3) spreads the id; the
// splitmix64 finalizer mixes its bits so ids that differ in one character get unrelated
// seeds. Sending the same body with "seed": derive_seed(custom_id) to `rapide serve`
// reproduces the batch's output (docs/batch.md).
#pragma once

#include <cstdint>
#include <string_view>

namespace rapide::batch {

uint64_t derive_seed(std::string_view custom_id);

}  // namespace rapide::batch
