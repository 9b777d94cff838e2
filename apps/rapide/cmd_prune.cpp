// rapide prune: structured pruning (train/pruning.h). Scores every FFN channel, KV group of
// heads and layer on calibration text, removes the least important, optionally heals the
// result by distillation from the unpruned model (--heal-steps), and writes a smaller dense
// GGUF. Healing holds out the end of its data (--holdout): it is scored while healing, stops
// a run that overfits with its best weights, and its perplexity is printed for the unpruned
// model and the pruned one before and after healing. When healing on the calibration text,
// scoring does not see the held-out tokens either.
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "apps/rapide/commands.h"
#include "apps/rapide/model_options.h"
#include "apps/rapide/train_flags.h"
#include "base/error.h"
#include "model/contiguous_kv_store.h"
#include "train/losses.h"
#include "train/pruning.h"

namespace rapide::cli {
namespace {

struct PruneCommandOptions {
  ModelOptions model;
  std::string calibration;
  int calibration_tokens = 8192;
  std::string importance = "magnitude";
  train::PruneOptions prune;
  int64_t heal_steps = 0;
  std::vector<std::string> heal_data;
  TrainFlags train;
  std::string output;
};

// Scores of every structure over the calibration windows: input norms through the inference
// engine's observer (magnitude), cross-entropy gradients of the training model (taylor), and
// the residual stream's block influence (both).
// The model's gradients are used as scratch (weights are left as they are).
train::StructureScores score(LoadedModel& loaded, train::TrainModel& model,
                             const std::vector<int32_t>& tokens, const PruneCommandOptions& o) {
  const int window = std::min(o.train.seq, loaded.model->config().max_context);
  std::fill(model.grads().begin(), model.grads().end(), 0.0f);
  train::ActivationNorms norms(model.shape().layers);
  loaded.model->set_linear_observer(&norms);
  ContiguousKvStore kv(loaded.model->config(), 1, window, KvType::kF32);
  std::vector<double> influence;
  Batch batch;
  std::vector<float> dlogits;
  const bool taylor = o.importance == "taylor";
  int windows = 0;
  for (size_t start = 0; start + window + 1 <= tokens.size(); start += window) {
    std::vector<int32_t> w(tokens.begin() + start, tokens.begin() + start + window + 1);
    if (loaded.tokenizer->bos_id() >= 0) w[0] = loaded.tokenizer->bos_id();
    batch.clear();
    for (int t = 0; t < window; ++t) batch.add(w[t], 0, t, false);
    loaded.model->forward(batch, kv, *loaded.pool);
    const std::span<const float> logits = model.forward(w.data(), 1, window);
    train::add_block_influence(model, window, influence);
    if (taylor) {
      dlogits.resize(logits.size());
      train::cross_entropy(logits.data(), window, model.shape().vocab, w.data() + 1, 1.0f,
                           dlogits.data());
      model.backward(dlogits.data());
    }
    ++windows;
  }
  loaded.model->set_linear_observer(nullptr);
  if (windows == 0) {
    fail(ErrorCode::kInvalidArgument,
         "the calibration text has {} tokens, fewer than one window of {} + 1", tokens.size(),
         window);
  }
  std::fprintf(stderr, "prune: scored on %d calibration windows of %d tokens (%s)\n", windows,
               window, o.importance.c_str());
  train::StructureScores scores =
      taylor ? train::taylor_scores(model) : train::magnitude_scores(model, norms);
  scores.layers = std::move(influence);
  return scores;
}

void run_prune(const PruneCommandOptions& o) {
  LoadedModel loaded = load_for_inference(o.model);
  require_gguf_teacher(loaded);
  std::vector<int32_t> calibration = tokenize_files(*loaded.tokenizer, {o.calibration});
  std::optional<train::HeldOutSplit> heal;
  if (o.heal_steps > 0) {
    const bool on_calibration = o.heal_data.empty();
    heal =
        training_data(loaded, on_calibration ? std::vector{o.calibration} : o.heal_data, o.train);
    // The held-out tokens are the end of the calibration text (training_data puts the files
    // last): importance is not measured on them either.
    if (on_calibration) {
      calibration.resize(calibration.size() - std::min(calibration.size(), heal->held_out.size()));
    }
  }
  if (static_cast<int>(calibration.size()) > o.calibration_tokens) {
    calibration.resize(static_cast<size_t>(o.calibration_tokens));
  }
  train::TrainModel original = train::TrainModel::from_file(*loaded.file);
  const train::StructureScores scores = score(loaded, original, calibration, o);
  const train::PrunePlan plan = train::plan_pruning(original.shape(), scores, o.prune);
  train::TrainModel pruned = train::apply_pruning(original, plan);
  const train::TrainShape& a = original.shape();
  const train::TrainShape& b = pruned.shape();
  std::string removed;
  for (int l = 0, k = 0; l < a.layers; ++l) {
    if (k < static_cast<int>(plan.keep_layers.size()) && plan.keep_layers[k] == l) {
      ++k;
    } else {
      removed += (removed.empty() ? "" : ",") + std::to_string(l);
    }
  }
  std::printf(
      "pruned: layers %d -> %d%s, heads %d/%d kv -> %d/%d, ffn %d -> %d, parameters %.2f M -> "
      "%.2f M (%.1f %%)\n",
      a.layers, b.layers, removed.empty() ? "" : (" (removed " + removed + ")").c_str(), a.heads,
      a.kv_heads, b.heads, b.kv_heads, a.ffn, b.ffn, original.parameter_count() / 1e6,
      pruned.parameter_count() / 1e6,
      100.0 * pruned.parameter_count() / static_cast<double>(original.parameter_count()));
  if (heal) distill_into(loaded, pruned, std::move(*heal), o.heal_steps, o.train, "heal");
  write_trained_model(pruned, loaded, o.train, loaded.file->config.name + "-pruned", o.output);
}

}  // namespace

void register_prune(CLI::App& app) {
  auto o = std::make_shared<PruneCommandOptions>();
  CLI::App* cmd = app.add_subcommand(
      "prune", "Remove the least important FFN channels, attention heads and layers of a model");
  add_model_options(*cmd, o->model);
  cmd->add_option("--calibration", o->calibration, "text file the importance is measured on")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("--calibration-tokens", o->calibration_tokens, "calibration tokens used at most")
      ->check(CLI::Range(2, 1 << 24))
      ->capture_default_str();
  cmd->add_option("--importance", o->importance,
                  "magnitude (|weight| x activation norm) or taylor (|weight x gradient|)")
      ->check(CLI::IsMember({"magnitude", "taylor"}))
      ->capture_default_str();
  cmd->add_option("--ffn", o->prune.ffn, "fraction of FFN channels to remove, [0, 1)")
      ->capture_default_str();
  cmd->add_option("--heads", o->prune.heads,
                  "fraction of attention heads to remove, [0, 1) (whole KV groups under GQA)")
      ->capture_default_str();
  cmd->add_option("--layers", o->prune.layers, "number of layers to remove")->capture_default_str();
  cmd->add_option("--multiple-of", o->prune.multiple_of,
                  "round the kept FFN width to a multiple of this (so the result quantizes)")
      ->capture_default_str();
  cmd->add_option("--heal-steps", o->heal_steps,
                  "distillation steps from the unpruned model after pruning (0: none)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40))
      ->capture_default_str();
  cmd->add_option("--heal-data", o->heal_data, "text files to heal on (default: --calibration)")
      ->check(CLI::ExistingFile);
  add_train_flags(*cmd, o->train);
  cmd->add_option("-o,--output", o->output, "output GGUF path")->required();
  cmd->callback([o] { run_prune(*o); });
}

}  // namespace rapide::cli
