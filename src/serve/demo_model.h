// The model `rapide serve` runs when no --model is given: a small Llama (real architecture,
// random weights) built in memory, so the server works on a machine with no model files.
//
// Its vocabulary is generated too: SentencePiece-style with byte fallback (every UTF-8 text
// encodes), printable ASCII, a few hundred common English word pieces, and ChatML control
// tokens with a ChatML chat template. Its output is random text; it exists to exercise the
// API, not to answer.
#pragma once

#include <cstdint>
#include <string>

#include "formats/model_file.h"

namespace rapide::serve {

inline constexpr const char* kDemoModelId = "rapide-demo-random";
inline constexpr const char* kDemoModelDescription =
    "demo (random weights): a built-in 2-layer Llama for trying the API; its text is "
    "meaningless. Serve a real model with --model PATH";

// Builds the model through the GGUF writer and reader, exactly as a file would load.
ModelFile make_demo_model(uint64_t seed = 1);

}  // namespace rapide::serve
