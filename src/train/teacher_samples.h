// Sequence-level distillation data (rapide distill --generate): sequences the teacher writes
// itself, sampled from BOS, for a student whose user has no corpus. Sampling goes through
// the serving sampler (sampling/sampler.h), one seeded Sampler per sequence, so the data is
// reproducible from the seed.
#pragma once

#include <cstdint>
#include <vector>

#include "base/thread_pool.h"
#include "model/model.h"

namespace rapide::train {

// `count` sequences of `length` tokens (BOS first), concatenated. Sequences run together
// through the engine in batches of up to 32. End-of-generation tokens are banned so every
// sequence has its full length.
std::vector<int32_t> generate_sequences(Model& teacher, ThreadPool& pool, int count, int length,
                                        int32_t bos, float temperature, uint64_t seed);

}  // namespace rapide::train
