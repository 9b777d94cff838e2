// rapide distill: trains a student to reproduce a teacher (KL to the teacher's top-k
// temperature-scaled distribution, teacher logits computed on the fly by the inference
// engine), from text files or from sequences the teacher writes itself (--generate). The
// student is a fresh model of --student-shape, or an existing GGUF (--student: e.g. a pruned
// teacher). The end of the data is held out (--holdout): scored while training, it stops a
// run that overfits and keeps its best weights, and its perplexity before and after is
// printed. Output: a GGUF with the teacher's tokenizer.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "apps/rapide/commands.h"
#include "apps/rapide/model_options.h"
#include "apps/rapide/train_flags.h"
#include "base/error.h"
#include "formats/llama_shape.h"

namespace rapide::cli {
namespace {

struct DistillCommandOptions {
  ModelOptions teacher;
  std::string student_shape;
  std::string student_path;
  std::vector<std::string> data;
  int64_t steps = 500;
  TrainFlags train;
  std::string output;
};

train::TrainModel make_student(const DistillCommandOptions& o, const ModelConfig& teacher) {
  if (o.student_shape.empty() == o.student_path.empty()) {
    fail(ErrorCode::kInvalidArgument, "give exactly one of --student-shape and --student");
  }
  if (!o.student_path.empty()) return train::TrainModel::from_file(load_model(o.student_path));
  const LlamaShape defaults{.dim = teacher.dim,
                            .layers = teacher.n_layers,
                            .heads = teacher.n_heads,
                            .kv_heads = teacher.n_kv_heads,
                            .ffn = teacher.ffn_dim,
                            .ctx = teacher.max_context};
  const LlamaShape s = parse_llama_shape(o.student_shape, defaults, "--student-shape");
  train::TrainShape shape = train::shape_of(teacher);
  shape.dim = s.dim;
  shape.layers = s.layers;
  shape.heads = s.heads;
  shape.kv_heads = s.kv_heads;
  shape.head_dim = s.head_dim();
  shape.ffn = s.ffn;
  shape.ctx = s.ctx;
  shape.tied = true;
  return train::TrainModel::random(shape, o.train.seed);
}

void run_distill(const DistillCommandOptions& o) {
  LoadedModel teacher = load_for_inference(o.teacher);
  require_gguf_teacher(teacher);
  train::TrainModel student = make_student(o, teacher.model->config());
  distill_into(teacher, student, training_data(teacher, o.data, o.train), o.steps, o.train,
               "distill");
  write_trained_model(student, teacher, o.train, teacher.file->config.name + "-distilled",
                      o.output);
}

}  // namespace

void register_distill(CLI::App& app) {
  auto o = std::make_shared<DistillCommandOptions>();
  CLI::App* cmd = app.add_subcommand(
      "distill", "Train a smaller student model to reproduce a teacher (knowledge distillation)");
  cmd->add_option("--teacher", o->teacher.model_path, "teacher model (GGUF)")->required();
  cmd->add_option("-t,--threads", o->teacher.threads, "threads of the teacher's engine")
      ->check(CLI::Range(0, 1024));
  cmd->add_option("--student-shape", o->student_shape,
                  "a fresh student: dim=..,layers=..,heads=..,kv_heads=..,ffn=..,ctx=.. (missing "
                  "keys keep the teacher's values)");
  cmd->add_option("--student", o->student_path,
                  "initialise the student from this GGUF (e.g. the teacher pruned)");
  cmd->add_option("--data", o->data, "text files to train on")->check(CLI::ExistingFile);
  cmd->add_option("--steps", o->steps, "optimizer steps")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40))
      ->capture_default_str();
  add_train_flags(*cmd, o->train);
  cmd->add_option("-o,--output", o->output, "output GGUF path")->required();
  cmd->callback([o] { run_distill(*o); });
}

}  // namespace rapide::cli
