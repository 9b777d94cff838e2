// Work the engine thread runs between its steps, one bounded slice at a time
// (Engine::run_between_steps). Long work that wants the engine's threads (an embeddings
// request's forward passes, the memory-bandwidth probe of /v1/engine/state) then interleaves
// with generation instead of pausing it, or of competing with it for the cores from a thread
// of its own.
//
// The engine runs one slice of one task after each step, round robin over the tasks (a large
// task does not hold back a small one), and slices back to back while no request runs. A
// slice should cost about what a step does (one forward pass of at most --max-batch-tokens
// tokens): that is what a task adds to a running stream's inter-token latency.
#pragma once

#include <string>

#include "base/thread_pool.h"

namespace rapide {

class BackgroundTask {
 public:
  virtual ~BackgroundTask() = default;

  // One slice, on the engine thread, with the engine's thread pool. Returns true when the
  // task is over (done, failed or cancelled: it reports that itself); the engine then
  // destroys it, which frees whatever it holds. An exception counts as abandon(its message).
  virtual bool run_slice(ThreadPool& pool) = 0;

  // The task ends unfinished: the engine stops (`reason` says so) or a slice threw. Called
  // once, on the engine thread; the task is destroyed after it.
  virtual void abandon(const std::string& reason) = 0;
};

}  // namespace rapide
