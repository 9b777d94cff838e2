// Consistency checks shared by all loaders: a ModelFile's config must be usable and its
// tensors must have the shapes the config implies (model_file.h lists them), so a broken
// file fails at load with a precise message instead of deep inside a forward pass.
#pragma once

#include "formats/model_file.h"

namespace rapide {

// Throws kCorrupt naming the first problem: non-positive sizes, heads that do not divide,
// a missing tensor of the config's block description (architecture.h) or one with the
// wrong shape, a vocabulary whose size differs from the embedding's. A file with tensors of
// an architecture rapide does not run gets kUnsupported naming it; vocabulary-only files
// (no tensors) only get config checks.
void check_model(const ModelFile& model);

}  // namespace rapide
