// What rapide distill and rapide prune --heal-steps share: the training flags (batch, sequence
// length, learning rate schedule, checkpoints, held-out data and early stop), the distillation
// flags (top-k, temperature, cross-entropy mix), text files as a token stream split into
// training and held-out tokens, and the distillation run itself with a teacher served by the
// inference engine, which reports the held-out perplexity of teacher and student before and
// after (issue 53: a lever that makes a model worse must say so).
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "apps/rapide/model_options.h"
#include "formats/tensor_type.h"
#include "train/distill_objective.h"
#include "train/held_out.h"
#include "train/train_model.h"
#include "train/trainer.h"

namespace rapide::cli {

struct TrainFlags {
  int batch = 8;
  int seq = 128;
  int accumulate = 1;
  float lr = 1e-3f;
  float min_lr = 1e-4f;
  int warmup = 20;
  float weight_decay = 0.0f;
  float clip = 1.0f;
  train::DistillOptions distill;
  std::string checkpoint;
  int checkpoint_every = 100;
  uint64_t seed = 1;
  std::string type = "f16";
  int generate = 0;  // sequences the teacher writes for the training data (--generate)
  float generate_temperature = 1.0f;
  double holdout = 0.1;  // fraction of the data kept out of training and scored (--holdout)
  int eval_every = 10;   // steps between held-out scores
  int patience = 3;      // scores without improvement before stopping early; 0: never
};

void add_train_flags(CLI::App& command, TrainFlags& flags);

// The output weight type (f32 or f16); kInvalidArgument otherwise.
TensorType trained_output_type(const std::string& name);

// Each file tokenized with BOS first, concatenated. kInvalidArgument for an unreadable file.
std::vector<int32_t> tokenize_files(const Tokenizer& tokenizer,
                                    const std::vector<std::string>& files);

// The training data: --generate sequences of --seq + 1 tokens written by the teacher, then
// `files` tokenized (BOS first each), with the last --holdout of that stream held out. The
// files come last so the held-out tokens are text the user gave whenever it is long enough
// (the generated sequences only when there are no files, or too few of their tokens).
// kInvalidArgument when there is no data, or too little to hold out a sequence and train on
// another.
train::HeldOutSplit training_data(LoadedModel& teacher, const std::vector<std::string>& files,
                                  const TrainFlags& flags);

// Trains `student` for `steps` on windows of data.train, distilling from `teacher` (its
// inference-engine model), scoring data.held_out as it goes (early stop, best weights kept),
// with progress on stderr; prints the run's figures on stdout: steps, loss, and the held-out
// perplexity of the teacher and of the student before and after.
train::TrainResult distill_into(LoadedModel& teacher, train::TrainModel& student,
                                train::HeldOutSplit data, int64_t steps, const TrainFlags& flags,
                                const std::string& label);

// The output copies the teacher's tokenizer from its GGUF: kUnsupported for another format
// (checked before any work is done).
void require_gguf_teacher(const LoadedModel& teacher);

// Writes `model` with the teacher's tokenizer; the teacher must be a GGUF file.
void write_trained_model(const train::TrainModel& model, const LoadedModel& teacher,
                         const TrainFlags& flags, const std::string& name, const std::string& path);

}  // namespace rapide::cli
