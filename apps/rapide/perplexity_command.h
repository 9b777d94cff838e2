// `rapide perplexity`'s measurement as a function: `rapide advise --text FILE` prices a
// lever's quality cost (quantization, KV type) with the very same code.
#pragma once

#include <cstdint>
#include <string>

#include "apps/rapide/model_options.h"

namespace rapide::cli {

struct PerplexityOptions {
  ModelOptions model;
  std::string text_path;
  int context = 512;
  int batch = 512;
  std::string kv_type = "f16";
  bool progress = true;  // a line per window on stderr
};

struct PerplexityFigure {
  double perplexity = 0.0, error = 0.0;  // error: one standard error
  int64_t scored_tokens = 0;
  double tokens_per_second = 0.0;
};

// llama.cpp's method (see cmd_perplexity.cpp). Throws Error(kInvalidArgument) for a window
// longer than the model's context or a text shorter than one window.
PerplexityFigure measure_perplexity(const PerplexityOptions& options);

}  // namespace rapide::cli
