// `rapide quantize --method awq|gptq --calibration`, --imatrix-out / --imatrix and --smooth
// through the real binary on stories260K: the calibrated files have exactly the layout
// round-to-nearest writes for the type (names, types, shapes, sizes: only values differ),
// they run, and bad input fails with a clear error.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <string>

#include "formats/gguf_reader.h"
#include "quant/imatrix.h"
#include "run_rapide.h"
#include "test_paths.h"

namespace rapide::testing {
namespace {

const char* kModel = "models/stories260K/stories260K.gguf";
const char* kCalibration = "reference/greedy/stories260K__Once_upon_a_time.txt";
const char* kHeldOut = "reference/text/stories-eval.txt";

class CliQuantizeCalibrated : public ::testing::Test {
 protected:
  void SetUp() override {
    RAPIDE_REQUIRE_SHARED(kModel);
    RAPIDE_REQUIRE_SHARED(kCalibration);
    RAPIDE_REQUIRE_SHARED(kHeldOut);
    dir_ = std::filesystem::temp_directory_path() /
           ("rapide_quantize_calib_test_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string out(const std::string& name) const { return (dir_ / name).string(); }
  CliResult quantize(const std::string& path, const std::string& args) {
    return run_rapide("quantize " + shared_path(kModel) + " " + path + " " + args);
  }
  std::string calibration() const { return " --calibration " + shared_path(kCalibration); }

  std::filesystem::path dir_;
};

TEST_F(CliQuantizeCalibrated, FilesKeepTheTypesLayoutAndRun) {
  for (const char* type : {"q4_0", "iq4_nl"}) {
    SCOPED_TRACE(type);
    const std::string rtn = out(std::string("rtn-") + type + ".gguf");
    ASSERT_EQ(quantize(rtn, std::string("--type ") + type).exit_code, 0);
    const GgufFile want = GgufFile::open(rtn);
    for (const char* method : {"awq", "gptq"}) {
      SCOPED_TRACE(method);
      const std::string path = out(std::string(method) + "-" + type + ".gguf");
      const CliResult r =
          quantize(path, std::string("--type ") + type + " --method " + method + calibration());
      ASSERT_EQ(r.exit_code, 0) << r.out;
      EXPECT_NE(r.out.find("calibrating"), std::string::npos) << r.out;  // the progress bar
      const GgufFile got = GgufFile::open(path);
      ASSERT_EQ(got.tensors().size(), want.tensors().size());
      int changed = 0;
      for (const GgufTensorInfo& w : want.tensors()) {
        const GgufTensorInfo* t = got.find_tensor(w.name);
        ASSERT_NE(t, nullptr) << w.name;
        EXPECT_EQ(t->type, w.type) << w.name;
        EXPECT_EQ(t->shape, w.shape) << w.name;
        ASSERT_EQ(t->size_bytes, w.size_bytes) << w.name;
        changed += std::memcmp(t->data, w.data, w.size_bytes) != 0;
      }
      EXPECT_GT(changed, 20);  // the matrices of every layer, not a copy of round-to-nearest
      if (std::string(type) != "q4_0") continue;  // running one type is enough
      const CliResult ppl =
          run_rapide("perplexity -m " + path + " -f " + shared_path(kHeldOut) + " --ctx 128");
      ASSERT_EQ(ppl.exit_code, 0) << ppl.out;
      EXPECT_NE(ppl.out.find("PPL = "), std::string::npos);
    }
  }
}

TEST_F(CliQuantizeCalibrated, ImatrixWrittenThenUsed) {
  const std::string imatrix = out("imatrix.dat");
  CliResult r = quantize(out("a.gguf"), "--type q4_0 --imatrix-out " + imatrix + calibration());
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const quant::Imatrix m = quant::read_imatrix(imatrix);
  EXPECT_EQ(m.entries.size(), 36u);  // 5 layers x 7 matrices + the head
  EXPECT_EQ(m.dataset, shared_path(kCalibration));
  r = quantize(out("b.gguf"), "--type q4_0 --imatrix " + imatrix);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  r = quantize(out("c.gguf"), "--type q4_0 --smooth 0.5 --imatrix " + imatrix);
  ASSERT_EQ(r.exit_code, 0) << r.out;
}

TEST_F(CliQuantizeCalibrated, BadInputFailsClearly) {
  struct Case {
    std::string args, message;
  };
  const Case cases[] = {
      {"--type q4_0 --method gptq", "needs"},
      {"--type q4_0 --method awq", "calibration"},
      {"--type q4_0 --imatrix " + shared_path(kCalibration), "imatrix"},
      {"--type q4_0 --method best" + calibration(), "method"},
      {"--type q4_0 --smooth 1.5" + calibration(), "smooth"},
      {"--type q4_k --method gptq" + calibration(), ""},  // falls back to q5_0 rows: runs
  };
  for (const Case& c : cases) {
    const CliResult r = quantize(out("bad.gguf"), c.args);
    if (c.message.empty()) {
      EXPECT_EQ(r.exit_code, 0) << c.args << "\n" << r.out;
      continue;
    }
    EXPECT_NE(r.exit_code, 0) << c.args;
    EXPECT_GE(r.exit_code, 1) << c.args;  // an error exit, not a signal
    EXPECT_NE(r.out.find(c.message), std::string::npos) << c.args << "\n" << r.out;
  }
}

}  // namespace
}  // namespace rapide::testing
