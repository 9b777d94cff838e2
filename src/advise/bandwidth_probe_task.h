// The read-bandwidth figure of GET /v1/engine/state, measured by the engine's own threads
// between its steps (engine/background_task.h) instead of by a pool of its own beside them:
// generation waits for at most one piece of the probe at a time, and the probe does not
// compete with the engine for the cores while it times.
//
// Bounded: a kServerProbeBytes buffer (the CLI's probe_machine reads 1 GiB), allocated and
// touched in the first slice (about 10-30 ms), then read once per slice (a few ms each), and
// freed after the last. Smaller buffers can sit partly in a large L3; this one is twice the
// 32 MiB one core reaches (MachineFacts::last_level_cache), which keeps a server's memory
// small: the 1 GiB probe took a server on a 16 MiB KV budget from 20 MB to 1.07 GB.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>

#include "engine/background_task.h"

namespace rapide::advise {

inline constexpr size_t kServerProbeBytes = size_t{64} << 20;
inline constexpr int kServerProbePasses = 8;

// `done` runs once on the engine thread with the best pass's bytes per second, or 0 when
// the engine stopped first.
std::unique_ptr<BackgroundTask> bandwidth_probe_task(std::function<void(double)> done,
                                                     size_t bytes = kServerProbeBytes,
                                                     int passes = kServerProbePasses);

}  // namespace rapide::advise
