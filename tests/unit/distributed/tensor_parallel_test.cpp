// Tensor-parallel sharding without MPI: two shards of a shared model run in two threads of
// this process, joined by an in-process group whose collectives are plain loops, and their
// logits are compared with the unsharded model's (the oracle: the one-process forward pass
// the golden tests check against llama.cpp). The MPI transport is tested end to end by
// tests/e2e/mpi_tensor_parallel_test.py; this test isolates the sharding arithmetic.
#include <gtest/gtest.h>

#include <algorithm>
#include <barrier>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <mutex>
#include <thread>

#include "base/error.h"
#include "model/contiguous_kv_store.h"
#include "model/model.h"
#include "model/pipeline_parallel.h"
#include "model/tensor_parallel.h"
#include "test_paths.h"

namespace rapide {
namespace {

// Collectives over shared memory for `size` threads: every call is a rendezvous.
struct SharedGroup {
  explicit SharedGroup(int size) : size(size), sync(size), inputs(size) {}
  int size;
  std::barrier<> sync;
  std::vector<const float*> inputs;
};

class ThreadRank : public TensorParallel {
 public:
  ThreadRank(SharedGroup& shared, int rank) : shared_(shared), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return shared_.size; }
  void begin_forward(const Batch&, const KvStore&, bool) override {}  // both threads run it
  void stage_plan(std::vector<uint8_t>) override {}  // both threads run the same passes
  void all_reduce_sum(float* data, size_t count) override {
    shared_.inputs[rank_] = data;
    shared_.sync.arrive_and_wait();
    sum_.assign(count, 0.0f);
    for (int r = 0; r < shared_.size; ++r) {
      for (size_t i = 0; i < count; ++i) sum_[i] += shared_.inputs[r][i];
    }
    shared_.sync.arrive_and_wait();  // everyone has read every input
    std::copy(sum_.begin(), sum_.end(), data);
  }
  void gather_columns(const float* local, int rows, int64_t total, float* out) override {
    shared_.inputs[rank_] = local;
    shared_.sync.arrive_and_wait();
    if (rank_ == 0) {
      for (int r = 0; r < shared_.size; ++r) {
        const SliceRange s = slice_range(total, shared_.size, r);
        for (int row = 0; row < rows; ++row) {
          std::copy_n(shared_.inputs[r] + row * s.size(), s.size(), out + row * total + s.begin);
        }
      }
    }
    shared_.sync.arrive_and_wait();
  }

 private:
  SharedGroup& shared_;
  int rank_;
  std::vector<float> sum_;
};

// Two-stage pipelines in threads: a queue per direction (stage 0 -> 1 activations, stage
// 1 -> 0 outputs), so micro-batches flow as they do between MPI ranks.
struct Channel {
  std::mutex mutex;
  std::condition_variable ready;
  std::deque<std::vector<float>> items;
  void push(const float* data, size_t count) {
    std::lock_guard<std::mutex> lock(mutex);
    items.emplace_back(data, data + count);
    ready.notify_all();
  }
  void pop(float* data, size_t count) {
    std::unique_lock<std::mutex> lock(mutex);
    ready.wait(lock, [&] { return !items.empty(); });
    EXPECT_EQ(items.front().size(), count);
    std::copy_n(items.front().begin(), std::min(count, items.front().size()), data);
    items.pop_front();
  }
};

// With tensor parallelism too (`lanes` tensor ranks per stage), tensor rank `lane` of stage s
// sends to the same lane of stage s + 1, as the MPI job does.
class ThreadStage : public PipelineParallel {
 public:
  ThreadStage(std::vector<Channel>& links, Channel& outputs, int stage, int stages, int lane = 0,
              int lanes = 1)
      : links_(links),
        outputs_(outputs),
        stage_(stage),
        stages_(stages),
        lane_(lane),
        lanes_(lanes) {}
  int stage() const override { return stage_; }
  int stages() const override { return stages_; }
  int micro_batches(int n) const override { return std::min(n, 3); }
  void begin_forward(const Batch&, const KvStore&, bool) override {}
  void stage_plan(std::vector<uint8_t>) override {}
  void send_next(const float* data, size_t count) override {
    links_[stage_ * lanes_ + lane_].push(data, count);
  }
  void receive_previous(float* data, size_t count) override {
    links_[(stage_ - 1) * lanes_ + lane_].pop(data, count);
  }
  void send_output(const float* data, size_t count) override { outputs_.push(data, count); }
  void receive_output(float* data, size_t count) override { outputs_.pop(data, count); }
  void end_forward() override {}

 private:
  std::vector<Channel>& links_;
  Channel& outputs_;
  int stage_, stages_, lane_, lanes_;
};

std::shared_ptr<const ModelFile> load(const std::string& relative) {
  return std::make_shared<const ModelFile>(load_model(testing::shared_path(relative)));
}

// A prompt, then a few greedy tokens one at a time: prefill and decode passes.
Batch prompt_batch(int n) {
  Batch b;
  for (int i = 0; i < n; ++i) b.add(1 + (i * 37) % 200, 0, i, true);
  return b;
}

struct Comparison {
  double max_abs_diff = 0.0;
  double max_abs_logit = 0.0;
  int argmax_mismatches = 0;
};

// Runs the same passes on the whole model and on tp x pp ranks (rank r: tensor rank r % tp of
// pipeline stage r / tp); compares every logit row of rank 0 with the whole's.
Comparison compare_grid(const std::shared_ptr<const ModelFile>& file, int tp, int pp) {
  const int ctx = 64, parts = tp * pp;
  Model whole(file);
  ContiguousKvStore whole_kv(whole.config(), 1, ctx);
  ThreadPool pool(1);
  std::vector<std::unique_ptr<SharedGroup>> groups;  // one per stage
  for (int s = 0; s < pp; ++s) groups.push_back(std::make_unique<SharedGroup>(tp));
  std::vector<Channel> links(parts);
  Channel outputs;
  std::vector<std::unique_ptr<ThreadRank>> ranks;
  std::vector<std::unique_ptr<ThreadStage>> stages;
  std::vector<std::unique_ptr<Model>> shards;
  std::vector<std::unique_ptr<ContiguousKvStore>> kvs;
  std::vector<std::unique_ptr<ThreadPool>> pools;
  for (int r = 0; r < parts; ++r) {
    const int stage = r / tp, lane = r % tp;
    ThreadRank* rank = nullptr;
    ThreadStage* pipe = nullptr;
    if (tp > 1) {
      ranks.push_back(std::make_unique<ThreadRank>(*groups[stage], lane));
      rank = ranks.back().get();
    }
    if (pp > 1) {
      stages.push_back(std::make_unique<ThreadStage>(links, outputs, stage, pp, lane, tp));
      pipe = stages.back().get();
    }
    shards.push_back(std::make_unique<Model>(file, ActQuant::kInt8, rank, pipe));
    kvs.push_back(std::make_unique<ContiguousKvStore>(shards.back()->config(), 1, ctx));
    pools.push_back(std::make_unique<ThreadPool>(1));
  }
  Comparison out;
  const int vocab = whole.config().vocab_size;
  Batch batch = prompt_batch(12);
  for (int step = 0; step < 8; ++step) {
    std::vector<float> expected;
    {
      const std::span<const float> l = whole.forward(batch, whole_kv, pool);
      expected.assign(l.begin(), l.end());
    }
    std::vector<float> got;
    std::vector<std::thread> threads;
    for (int r = 0; r < parts; ++r) {
      threads.emplace_back([&, r] {
        const std::span<const float> l = shards[r]->forward(batch, *kvs[r], *pools[r]);
        if (r == 0) got.assign(l.begin(), l.end());
      });
    }
    for (std::thread& t : threads) t.join();
    EXPECT_EQ(got.size(), expected.size());
    if (got.size() != expected.size()) return out;
    for (size_t i = 0; i < got.size(); ++i) {
      out.max_abs_diff = std::max<double>(out.max_abs_diff, std::fabs(got[i] - expected[i]));
      out.max_abs_logit = std::max<double>(out.max_abs_logit, std::fabs(expected[i]));
    }
    const int rows = static_cast<int>(got.size() / vocab);
    for (int row = 0; row < rows; ++row) {
      const auto e = expected.begin() + static_cast<int64_t>(row) * vocab;
      const auto g = got.begin() + static_cast<int64_t>(row) * vocab;
      if (std::max_element(e, e + vocab) - e != std::max_element(g, g + vocab) - g) {
        ++out.argmax_mismatches;
      }
    }
    // The next pass decodes the whole model's greedy token.
    const auto last = expected.end() - vocab;
    const int32_t next = static_cast<int32_t>(std::max_element(last, expected.end()) - last);
    const int32_t position = batch.positions.back() + 1;
    batch.clear();
    batch.add(next, 0, position, true);
  }
  std::printf(
      "%d shards x %d stages: max |logit diff| %.3g, max |logit| %.3g, argmax "
      "mismatches %d\n",
      tp, pp, out.max_abs_diff, out.max_abs_logit, out.argmax_mismatches);
  return out;
}

// `parts` tensor-parallel shards, or pipeline stages when `pipeline`.
Comparison compare_sharded(const std::shared_ptr<const ModelFile>& file, int parts,
                           bool pipeline = false) {
  return pipeline ? compare_grid(file, 1, parts) : compare_grid(file, parts, 1);
}

// Stated tolerance: the shards sum the same products in another order (per rank, then the
// all-reduce), so logits differ by rounding only: at most 1e-4 of the largest |logit| for f32
// weights; with Q8_0 the int8 activations of the next layer may round a value the other way,
// so 2e-2 there. Greedy choices must not change on these prompts.
void expect_shards_match(const std::string& relative, int parts, double tolerance) {
  RAPIDE_REQUIRE_SHARED(relative);
  const Comparison c = compare_sharded(load(relative), parts);
  EXPECT_LE(c.max_abs_diff, tolerance * c.max_abs_logit) << "max |logit| " << c.max_abs_logit;
  EXPECT_EQ(c.argmax_mismatches, 0);
}

TEST(TensorParallelTest, TwoShardsMatchTheWholeModelF32) {
  expect_shards_match("models/stories260K/stories260K.gguf", 2, 1e-4);
}

TEST(TensorParallelTest, TwoShardsMatchTheWholeModelQ8_0) {
  expect_shards_match("models/tinystories-656k/TinyStories-656K-Q8_0.gguf", 2, 2e-2);
}

TEST(TensorParallelTest, FourShardsMatchTheWholeModelF16) {
  expect_shards_match("models/tinystories-656k/TinyStories-656K-F16.gguf", 4, 1e-3);
}

// A pipeline computes exactly what one process does (the same sums in the same order, only
// in other threads), micro-batch by micro-batch: logits equal bit for bit.
TEST(PipelineParallelTest, TwoStagesMatchTheWholeModelExactly) {
  RAPIDE_REQUIRE_SHARED("models/tinystories-656k/TinyStories-656K-Q8_0.gguf");
  const auto file = load("models/tinystories-656k/TinyStories-656K-Q8_0.gguf");
  const Comparison c = compare_sharded(file, 2, true);
  EXPECT_EQ(c.max_abs_diff, 0.0);
  EXPECT_EQ(c.argmax_mismatches, 0);
  Model stage0(file, ActQuant::kInt8, nullptr, nullptr);
  EXPECT_EQ(stage0.config().n_layers, 2);
}

TEST(PipelineParallelTest, FiveLayersOverTwoStagesSplitThreeTwo) {
  RAPIDE_REQUIRE_SHARED("models/stories260K/stories260K.gguf");
  const auto file = load("models/stories260K/stories260K.gguf");
  const Comparison c = compare_sharded(file, 2, true);
  EXPECT_EQ(c.max_abs_diff, 0.0);
  std::vector<Channel> links(2);
  Channel outputs;
  ThreadStage first(links, outputs, 0, 2), second(links, outputs, 1, 2);
  Model a(file, ActQuant::kInt8, nullptr, &first), b(file, ActQuant::kInt8, nullptr, &second);
  EXPECT_EQ(a.first_layer(), 0);
  EXPECT_EQ(a.config().n_layers, 3);
  EXPECT_EQ(b.first_layer(), 3);
  EXPECT_EQ(b.config().n_layers, 2);
  EXPECT_LT(a.weight_bytes() + b.weight_bytes(), 2 * Model(file).weight_bytes());
}

// deepseek2 (multi-head latent attention, a leading dense layer, then MoE layers): its 3
// layers split 2 / 1, so the second stage's only layer is an MoE layer by its model-wide
// index. Bit for bit the whole model's logits. (Tensor parallelism refuses it: MLA.)
TEST(PipelineParallelTest, Deepseek2OverTwoStagesMatchesExactly) {
  RAPIDE_REQUIRE_SHARED("reference/llamacpp2/models/deepseek2-F32.gguf");
  const auto file = load("reference/llamacpp2/models/deepseek2-F32.gguf");
  const Comparison c = compare_sharded(file, 2, true);
  EXPECT_EQ(c.max_abs_diff, 0.0);
  EXPECT_EQ(c.argmax_mismatches, 0);
}

// --tp 2 --pp 2: each of 2 stages split over 2 tensor ranks. Within tensor parallelism's
// rounding of the whole model (the stages add nothing: bit-exact), on both shared models
// whose heads divide by 2 (stories260K: 8 heads / 4 kv heads over 5 layers, 3 + 2).
TEST(TensorParallelTest, TwoShardsByTwoStagesMatchTheWholeModel) {
  RAPIDE_REQUIRE_SHARED("models/stories260K/stories260K.gguf");
  for (const auto& [model, tolerance] :
       {std::pair<const char*, double>{"models/stories260K/stories260K.gguf", 1e-4},
        {"models/tinystories-656k/TinyStories-656K-Q8_0.gguf", 2e-2}}) {
    SCOPED_TRACE(model);
    const auto file = load(model);
    const Comparison c = compare_grid(file, 2, 2);
    EXPECT_LE(c.max_abs_diff, tolerance * c.max_abs_logit);
    EXPECT_GT(c.max_abs_logit, 0.0);
    EXPECT_EQ(c.argmax_mismatches, 0);
    // Each stage's shard equals --tp 2's shard of the same layers, exactly.
    const Comparison tensor_only = compare_grid(file, 2, 1);
    EXPECT_EQ(c.max_abs_diff, tensor_only.max_abs_diff);
  }
}

// The 2026 families (shared/reference/llamacpp2): tensor-parallel shards where the heads
// split (Llama 3's rope factors, Qwen3's per-head q/k norms), and pipeline stages, exactly,
// for every architecture of two or more layers (per-layer windows and rope tables follow the
// model-wide layer index, olmo2's post-norms, cohere2's parallel blocks, granite's
// multipliers).
TEST(TensorParallelTest, NewArchitecturesShardAndStage) {
  const std::string dir = "reference/llamacpp2/";
  RAPIDE_REQUIRE_SHARED(dir + "models/llama3-rope-F32.gguf");
  expect_shards_match(dir + "models/llama3-rope-F32.gguf", 2, 1e-4);
  expect_shards_match(dir + "hf/qwen3", 2, 1e-4);
  for (const char* m :
       {"models/olmo2-F32.gguf", "models/granite-F32.gguf", "models/cohere2-F32.gguf",
        "models/gemma-F32.gguf", "hf/qwen3", "hf/gemma3"}) {
    SCOPED_TRACE(m);
    const Comparison c = compare_sharded(load(dir + m), 2, true);
    EXPECT_EQ(c.max_abs_diff, 0.0);
    EXPECT_EQ(c.argmax_mismatches, 0);
  }
}

// OLMo 2 normalises q and k over all heads together: a rank holding half the heads cannot,
// so the shard is refused by name rather than computed wrongly.
TEST(TensorParallelTest, WholeVectorQkNormIsRefused) {
  const std::string path = "reference/llamacpp2/models/olmo2-F32.gguf";
  RAPIDE_REQUIRE_SHARED(path);
  const auto file = load(path);
  SharedGroup shared(2);
  ThreadRank rank(shared, 0);
  try {
    Model shard(file, ActQuant::kInt8, &rank);
    FAIL() << "olmo2 sharded";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
    EXPECT_NE(std::string(e.what()).find("q/k norm"), std::string::npos) << e.what();
  }
}

std::string split_error(const ModelFile& file, int parts) {
  try {
    check_tensor_split(file, parts);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    return e.what();
  }
  return "";
}

TEST(TensorParallelTest, UnsplittableShapesAreRefused) {
  RAPIDE_REQUIRE_SHARED("models/stories260K/stories260K.gguf");
  ModelFile file = *load("models/stories260K/stories260K.gguf");  // 8 heads, 4 kv, FFN 172
  EXPECT_EQ(split_error(file, 1), "");
  EXPECT_EQ(split_error(file, 2), "");
  EXPECT_NE(split_error(file, 3).find("heads"), std::string::npos);
  EXPECT_NE(split_error(file, 8).find("kv heads"), std::string::npos);
  // The same shapes stored as Q8_0: FFN 172 / 2 = 86 columns of ffn_down are not whole
  // 32-value blocks (only the type matters to the check).
  for (TensorView& t : file.tensors) {
    if (t.name.find("ffn_down") != std::string::npos) t.type = TensorType::kQ8_0;
  }
  const std::string e = split_error(file, 2);
  EXPECT_NE(e.find("ffn_down"), std::string::npos) << e;
  EXPECT_NE(e.find("blocks"), std::string::npos) << e;
}

TEST(TensorParallelTest, SliceRangesCoverTheWholeInOrder) {
  int64_t next = 0;
  for (int r = 0; r < 3; ++r) {
    const SliceRange s = slice_range(10, 3, r);
    EXPECT_EQ(s.begin, next);
    EXPECT_EQ(s.size(), r == 0 ? 4 : 3);
    next = s.end;
  }
  EXPECT_EQ(next, 10);
}

}  // namespace
}  // namespace rapide
