// Progress of a long GGUF write on stderr (rapide synth, rapide quantize): a line every 10 %
// of the tensors, and one at the end.
#pragma once

#include <cstddef>
#include <cstdio>
#include <functional>

namespace rapide::cli {

inline std::function<void(size_t, size_t)> write_progress_printer() {
  return [last_percent = -1](size_t done, size_t total) mutable {
    const int percent = static_cast<int>(done * 100 / total);
    if (percent / 10 != last_percent / 10 || done == total) {
      std::fprintf(stderr, "  %3d%% (%zu/%zu tensors)\n", percent, done, total);
      last_percent = percent;
    }
  };
}

}  // namespace rapide::cli
