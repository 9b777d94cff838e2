// Training checkpoints: the step reached, the model's shape, its F32 weights and AdamW's
// moments, in one binary file written through a temporary file renamed at the end (a run
// killed mid-write keeps its previous checkpoint). With the data order a function of the
// step (train/token_batches.h), this is all a resumed run needs to continue bit for bit.
#pragma once

#include <cstdint>
#include <string>

#include "train/adamw.h"
#include "train/train_model.h"

namespace rapide::train {

void save_checkpoint(const std::string& path, int64_t step, const TrainModel& model,
                     AdamW& optimizer);
// Restores weights and moments into model and optimizer; returns the step to continue
// from. Throws kCorrupt for a file that is not a checkpoint or is truncated, and
// kInvalidArgument when its shape differs from the model's.
int64_t load_checkpoint(const std::string& path, TrainModel& model, AdamW& optimizer);

}  // namespace rapide::train
