#include "apps/rapide/train_flags.h"

#include <cmath>
#include <cstdio>
#include <optional>

#include "base/clock.h"
#include "base/error.h"
#include "base/mapped_file.h"
#include "formats/gguf_reader.h"
#include "train/gguf_export.h"
#include "train/teacher_samples.h"

namespace rapide::cli {

void add_train_flags(CLI::App& cmd, TrainFlags& f) {
  cmd.add_option("--batch", f.batch, "sequences per micro-batch")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  cmd.add_option("--seq", f.seq, "tokens per training sequence")
      ->check(CLI::Range(2, 1 << 16))
      ->capture_default_str();
  cmd.add_option("--accumulate", f.accumulate, "micro-batches per optimizer step")
      ->check(CLI::Range(1, 1 << 16))
      ->capture_default_str();
  cmd.add_option("--lr", f.lr, "peak learning rate (AdamW)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd.add_option("--min-lr", f.min_lr, "learning rate at the end of the cosine decay")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd.add_option("--warmup", f.warmup, "linear warm-up steps")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd.add_option("--weight-decay", f.weight_decay, "AdamW weight decay (matrices only)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd.add_option("--clip", f.clip, "gradient clipping by global norm (0: off)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd.add_option("--top-k", f.distill.top_k, "teacher tokens kept per position")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  cmd.add_option("--temperature", f.distill.loss.temperature, "distillation temperature")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd.add_option("--ce-weight", f.distill.loss.ce_weight,
                 "weight of cross-entropy on the data in the loss (0: pure KL)")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  cmd.add_option("--checkpoint", f.checkpoint,
                 "checkpoint file: written every --checkpoint-every steps, resumed from when it "
                 "exists");
  cmd.add_option("--checkpoint-every", f.checkpoint_every, "steps between checkpoints")
      ->check(CLI::Range(1, 1 << 30))
      ->capture_default_str();
  cmd.add_option("--seed", f.seed, "seed of initialisation and data order")->capture_default_str();
  cmd.add_option("--generate", f.generate,
                 "also train on this many sequences of --seq + 1 tokens sampled from the teacher "
                 "(sequence-level distillation)")
      ->check(CLI::Range(0, 1 << 20));
  cmd.add_option("--generate-temperature", f.generate_temperature,
                 "sampling temperature of --generate")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd.add_option("--holdout", f.holdout,
                 "fraction of the data (its end) kept out of training and scored every "
                 "--eval-every steps, at least one sequence (0: none, overfitting goes unnoticed)")
      ->check(CLI::Range(0.0, 0.9))
      ->capture_default_str();
  cmd.add_option("--eval-every", f.eval_every, "steps between held-out scores")
      ->check(CLI::Range(1, 1 << 30))
      ->capture_default_str();
  cmd.add_option("--patience", f.patience,
                 "stop after this many held-out scores in a row without improvement (0: never "
                 "stop early; the best weights are kept either way)")
      ->check(CLI::Range(0, 1 << 20))
      ->capture_default_str();
  cmd.add_option("--type", f.type, "output weight type: f32 | f16")
      ->check(CLI::IsMember({"f32", "f16"}))
      ->capture_default_str();
}

TensorType trained_output_type(const std::string& name) {
  if (name == "f32") return TensorType::kF32;
  if (name == "f16") return TensorType::kF16;
  fail(ErrorCode::kInvalidArgument, "--type '{}': trained models are written as f32 or f16", name);
}

std::vector<int32_t> tokenize_files(const Tokenizer& tokenizer,
                                    const std::vector<std::string>& files) {
  std::vector<int32_t> stream;
  for (const std::string& path : files) {
    const std::vector<int32_t> tokens = tokenizer.encode(read_text_file(path), /*add_bos=*/true);
    stream.insert(stream.end(), tokens.begin(), tokens.end());
  }
  return stream;
}

train::HeldOutSplit training_data(LoadedModel& teacher, const std::vector<std::string>& files,
                                  const TrainFlags& f) {
  std::vector<int32_t> stream;
  if (f.generate > 0) {
    const TimePoint start = Clock::now();
    stream = train::generate_sequences(*teacher.model, *teacher.pool, f.generate, f.seq + 1,
                                       teacher.tokenizer->bos_id(), f.generate_temperature, f.seed);
    std::fprintf(stderr, "generated %d teacher sequences of %d tokens in %.1f s\n", f.generate,
                 f.seq + 1, seconds_between(start, Clock::now()));
  }
  const std::vector<int32_t> text = tokenize_files(*teacher.tokenizer, files);
  stream.insert(stream.end(), text.begin(), text.end());
  if (stream.empty()) {
    fail(ErrorCode::kInvalidArgument, "no training data: give --data files or --generate N");
  }
  return train::split_held_out(std::move(stream), f.holdout, f.seq);
}

namespace {

// The held-out figures on stdout (the command's result): every score, then before and after.
void report_held_out(const train::TrainResult& r, double teacher_loss, int64_t held_tokens,
                     const train::HeldOutSet& set, const TrainFlags& f, const std::string& label) {
  std::string scores;
  for (const train::HeldOutScore& s : r.held_out) {
    scores += fmt::format("{}{}: {:.2f}", scores.empty() ? "" : ", ", s.step, s.perplexity());
  }
  std::printf("%s: held-out perplexity by step: %s\n", label.c_str(), scores.c_str());
  const train::HeldOutScore& before = r.held_out.front();
  std::printf(
      "%s: held-out perplexity %.2f before, %.2f after (teacher %.2f; %lld tokens held out, "
      "%.0f %% of the data, %lld scored)\n",
      label.c_str(), before.perplexity(), r.best.perplexity(), std::exp(teacher_loss),
      static_cast<long long>(held_tokens), f.holdout * 100.0,
      static_cast<long long>(set.scored_tokens()));
  if (r.stopped_early) {
    std::printf("%s: stopped early after step %lld: no better held-out loss for %d scores\n",
                label.c_str(), static_cast<long long>(r.held_out.back().step), f.patience);
  }
  if (r.kept_earlier()) {
    std::printf(
        "%s: warning: held-out perplexity rose from %.2f (step %lld) to %.2f (step %lld): "
        "training made the model worse on text it did not see (overfitting, or --lr too high); "
        "kept the weights of step %lld\n",
        label.c_str(), r.best.perplexity(), static_cast<long long>(r.best.step),
        r.held_out.back().perplexity(), static_cast<long long>(r.held_out.back().step),
        static_cast<long long>(r.best.step));
  }
  if (r.best.step == before.step && r.held_out.size() > 1) {
    std::printf(
        "%s: warning: training did not improve the held-out perplexity: the weights "
        "are those from before it (more or other data, or a lower --lr, may help)\n",
        label.c_str());
  }
}

}  // namespace

train::TrainResult distill_into(LoadedModel& teacher, train::TrainModel& student,
                                train::HeldOutSplit split, int64_t steps, const TrainFlags& f,
                                const std::string& label) {
  if (f.seq > student.shape().ctx || f.seq > teacher.model->config().max_context) {
    fail(ErrorCode::kInvalidArgument,
         "--seq {} exceeds the context of the teacher ({}) or student ({})", f.seq,
         teacher.model->config().max_context, student.shape().ctx);
  }
  const int32_t bos = teacher.tokenizer->bos_id();
  std::optional<train::HeldOutSet> held_out;
  if (!split.held_out.empty()) held_out.emplace(split.held_out, f.seq, bos);
  const train::TokenBatches data(std::move(split.train), f.seq, bos, f.seed);
  train::DistillObjective objective(*teacher.model, *teacher.pool, student.shape().vocab,
                                    f.distill);
  train::TrainOptions o;
  o.steps = steps;
  o.batch = f.batch;
  o.accumulate = f.accumulate;
  o.adamw.lr = f.lr;
  o.adamw.min_lr = std::min(f.min_lr, f.lr);
  o.adamw.warmup_steps = static_cast<int>(std::min<int64_t>(f.warmup, steps));
  o.adamw.weight_decay = f.weight_decay;
  o.adamw.clip_norm = f.clip;
  o.checkpoint = f.checkpoint;
  o.checkpoint_every = f.checkpoint_every;
  o.label = label;
  o.held_out = held_out ? &*held_out : nullptr;
  o.eval_every = f.eval_every;
  o.patience = f.patience;
  std::fprintf(stderr,
               "%s: %.2f M parameters, %lld data tokens, %lld steps of %d x %d x %d tokens\n",
               label.c_str(), student.parameter_count() / 1e6, static_cast<long long>(data.size()),
               static_cast<long long>(steps), f.batch, f.accumulate, f.seq);
  const int64_t held_tokens = static_cast<int64_t>(split.held_out.size());
  if (held_out) {
    std::fprintf(stderr, "%s: %lld tokens held out, scored every %d steps (%d windows of %d)\n",
                 label.c_str(), static_cast<long long>(held_tokens), f.eval_every,
                 held_out->windows(), f.seq + 1);
  } else {
    std::fprintf(stderr,
                 "%s: warning: no held-out data (--holdout 0): overfitting goes "
                 "unnoticed\n",
                 label.c_str());
  }
  train::TrainResult r = train::train(student, data, objective, o);
  if (r.first_step > 0) {
    std::fprintf(stderr, "%s: resumed from %s at step %lld\n", label.c_str(), f.checkpoint.c_str(),
                 static_cast<long long>(r.first_step));
  }
  std::printf("%s: %lld steps, final loss %.4f, %.0f tokens/s, %.1f s\n", label.c_str(),
              static_cast<long long>(r.losses.size()), r.losses.empty() ? 0.0 : r.losses.back(),
              r.tokens_per_second(), r.seconds);
  if (held_out) {
    report_held_out(r, held_out->loss(*teacher.model, *teacher.pool), held_tokens, *held_out, f,
                    label);
  }
  return r;
}

void require_gguf_teacher(const LoadedModel& teacher) {
  if (teacher.file->format != "gguf") {
    fail(ErrorCode::kUnsupported,
         "'{}' is a {} model: the output copies the tokenizer of a GGUF model, convert it first",
         teacher.file->path, teacher.file->format);
  }
}

void write_trained_model(const train::TrainModel& model, const LoadedModel& teacher,
                         const TrainFlags& f, const std::string& name, const std::string& path) {
  require_gguf_teacher(teacher);
  train::write_gguf(model, GgufFile::open(teacher.file->path), trained_output_type(f.type), name,
                    path);
  std::printf("wrote %s: %.2f M parameters (dim %d, %d layers, %d/%d heads, ffn %d), %s\n",
              path.c_str(), model.parameter_count() / 1e6, model.shape().dim, model.shape().layers,
              model.shape().heads, model.shape().kv_heads, model.shape().ffn, f.type.c_str());
}

}  // namespace rapide::cli
