// The few numbers that describe a loaded model to a user: how many parameters, how many
// bytes on disk, and which tensor type holds most of its weights ("q8_0" for a Q8_0
// quantization, whose norms stay f32). `rapide inspect` prints them; `rapide serve` reports
// them in /v1/models.
#pragma once

#include <cstdint>
#include <string>

#include "formats/model_file.h"

namespace rapide {

struct ModelSummary {
  uint64_t parameters = 0;  // elements of every tensor
  uint64_t file_bytes = 0;  // the model file (or folder's files) on disk; 0 when unknown
  std::string weight_type;  // the type of the largest share of tensor bytes
};

ModelSummary summarize_model(const ModelFile& model);

}  // namespace rapide
