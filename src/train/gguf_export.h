// Writes a TrainModel as a Llama GGUF that every rapide command and llama.cpp load: llama.*
// hyper-parameters (with attention.key_length when heads were pruned, so the head size is
// not dim / heads), the tokenizer.* keys of a source GGUF, matrices in F32 or F16 and norms
// in F32. A tied model has no output.weight (loaders then reuse token_embd.weight).
#pragma once

#include <string>

#include "formats/gguf_reader.h"
#include "formats/tensor_type.h"
#include "train/train_model.h"

namespace rapide::train {

// Throws kInvalidArgument for a type other than F32 or F16.
void write_gguf(const TrainModel& model, const GgufFile& tokenizer_source, TensorType type,
                const std::string& name, const std::string& path);

}  // namespace rapide::train
