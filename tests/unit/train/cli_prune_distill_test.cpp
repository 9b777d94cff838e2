// `rapide prune` and `rapide distill` end to end through the real binary on stories260K
// (F32 weights): pruning nothing gives back the original's logits exactly; pruning heads,
// channels and a layer gives consistent shapes in a file rapide loads and runs; a distilled
// student of a chosen shape loads; bad input fails with exit 2 and a message.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "engine_logits.h"
#include "run_rapide.h"
#include "test_paths.h"

namespace rapide::testing {
namespace {

const char* kModel = "models/stories260K/stories260K.gguf";
const char* kText = "reference/text/stories-eval.txt";

class CliPruneDistill : public ::testing::Test {
 protected:
  void SetUp() override {
    RAPIDE_REQUIRE_SHARED(kModel);
    RAPIDE_REQUIRE_SHARED(kText);
    dir_ = std::filesystem::temp_directory_path() /
           ("rapide_prune_test_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string out(const std::string& name) const { return (dir_ / name).string(); }
  std::string model() const { return shared_path(kModel); }
  std::string text() const { return shared_path(kText); }

  std::filesystem::path dir_;
};

using train::testing::engine_logits;

TEST_F(CliPruneDistill, PruningNothingGivesTheOriginalLogits) {
  const CliResult r =
      run_rapide("prune -m " + model() + " --calibration " + text() +
                 " --ffn 0 --heads 0 --layers 0 --seq 64 --type f32 -o " + out("same.gguf"));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(engine_logits(out("same.gguf")), engine_logits(model()));
}

TEST_F(CliPruneDistill, PrunedShapesAreConsistentAndTheModelRuns) {
  for (const std::string importance : {"magnitude", "taylor"}) {
    const std::string path = out(importance + ".gguf");
    const CliResult r = run_rapide(
        "prune -m " + model() + " --calibration " + text() + " --importance " + importance +
        " --ffn 0.5 --heads 0.25 --layers 1 --multiple-of 1 --seq 64 --heal-steps 3 --batch 2 "
        "-o " +
        path);
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_NE(r.out.find("layers 5 -> 4"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("heal: 3 steps"), std::string::npos) << r.out;
    const ModelFile file = load_model(path);
    const ModelConfig& c = file.config;
    EXPECT_EQ(c.n_layers, 4);
    EXPECT_EQ(c.n_kv_heads, 3);  // one of 4 KV groups (2 query heads each) removed
    EXPECT_EQ(c.n_heads, 6);
    EXPECT_EQ(c.head_dim, 8);
    EXPECT_EQ(c.ffn_dim, 86);  // 172 / 2
    EXPECT_EQ(file.get("blk.3.attn_q.weight").shape, (std::vector<int64_t>{64, 48}));
    EXPECT_EQ(file.get("blk.3.attn_output.weight").shape, (std::vector<int64_t>{48, 64}));
    EXPECT_EQ(file.get("blk.0.ffn_down.weight").shape, (std::vector<int64_t>{86, 64}));
    EXPECT_EQ(file.find("blk.4.attn_q.weight"), nullptr);
    const CliResult run = run_rapide("run -m " + path + " -p 'Once upon a time' -n 8");
    EXPECT_EQ(run.exit_code, 0) << run.out;
  }
}

TEST_F(CliPruneDistill, DistilledStudentOfAChosenShapeLoads) {
  const std::string path = out("student.gguf");
  const std::string checkpoint = out("student.ckpt");
  const CliResult r = run_rapide(
      "distill --teacher " + model() +
      " --student-shape dim=32,layers=2,heads=4,kv_heads=2,ffn=64 --data " + text() +
      " --generate 4 --seq 32 --batch 2 --steps 6 --checkpoint " + checkpoint + " -o " + path);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("distill: 6 steps"), std::string::npos) << r.out;
  EXPECT_TRUE(std::filesystem::exists(checkpoint));
  const ModelFile file = load_model(path);
  EXPECT_EQ(file.config.dim, 32);
  EXPECT_EQ(file.config.n_layers, 2);
  EXPECT_EQ(file.config.vocab_size, 512);
  EXPECT_EQ(file.get("blk.0.attn_q.weight").type, TensorType::kF16);
  // Asking for more steps resumes from the checkpoint.
  const CliResult more = run_rapide(
      "distill --teacher " + model() +
      " --student-shape dim=32,layers=2,heads=4,kv_heads=2,ffn=64 --data " + text() +
      " --generate 4 --seq 32 --batch 2 --steps 8 --checkpoint " + checkpoint + " -o " + path);
  ASSERT_EQ(more.exit_code, 0) << more.out;
  EXPECT_NE(more.out.find("resumed from"), std::string::npos) << more.out;
  EXPECT_NE(more.out.find("distill: 2 steps"), std::string::npos) << more.out;
}

TEST_F(CliPruneDistill, BadInputFailsWithAMessage) {
  CliResult r = run_rapide("prune -m " + model() + " --calibration " + text() + " --ffn 1.5 -o " +
                           out("x.gguf"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.out.find("--ffn and --heads are fractions"), std::string::npos) << r.out;
  r = run_rapide("prune -m " + model() + " --calibration " + text() + " --layers 5 -o " +
                 out("x.gguf"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.out.find("at least one must stay"), std::string::npos) << r.out;
  r = run_rapide("distill --teacher " + model() + " --student " + model() +
                 " --student-shape dim=32 -o " + out("x.gguf"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.out.find("exactly one of --student-shape and --student"), std::string::npos) << r.out;
  r = run_rapide("distill --teacher " + model() +
                 " --student-shape dim=32,heads=3 --generate 1 -o " + out("x.gguf"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.out.find("--student-shape"), std::string::npos) << r.out;
  r = run_rapide("distill --teacher " + model() + " --student-shape dim=32,heads=4,kv_heads=2 -o " +
                 out("x.gguf"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.out.find("no training data"), std::string::npos) << r.out;
  // The output copies a GGUF's tokenizer: another format is refused before any work.
  r = run_rapide("prune -m " + shared_path("models/stories260K/stories260K.bin") +
                 " --calibration " + text() + " -o " + out("x.gguf"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("copies the tokenizer of a GGUF model"), std::string::npos) << r.out;
  EXPECT_FALSE(std::filesystem::exists(out("x.gguf")));
}

}  // namespace
}  // namespace rapide::testing
