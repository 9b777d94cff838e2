// Progress of a long GGUF write on stderr (rapide synth, rapide quantize): a line every 10 %
// of the tensors, and one at the end. And of a calibration (rapide quantize --method ...):
// a bar with the layer being processed.
#pragma once

#include <cstddef>
#include <cstdio>
#include <functional>
#include <string>

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

inline std::function<void(const std::string&, int, int)> calibration_progress_printer() {
  return [](const std::string& what, int done, int total) {
    constexpr int kWidth = 20;
    const int filled = total > 0 ? done * kWidth / total : kWidth;
    std::fprintf(stderr, "  calibrating [%s%s] %d/%d %s\n", std::string(filled, '#').c_str(),
                 std::string(kWidth - filled, ' ').c_str(), done, total, what.c_str());
  };
}

}  // namespace rapide::cli
