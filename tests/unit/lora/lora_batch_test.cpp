// Rows of several adapters and of the base in one forward pass: each row gets bit for bit what
// it gets alone (the batch-invariance rule of tests/golden/batch_invariance_test, per
// adapter), through chunked prefills and batched greedy decoding. And LoraRows' segmented
// products against its scalar reference, row by row.
#include <gtest/gtest.h>

#include <random>

#include "base/error.h"

#include "golden/llamacpp_reference.h"
#include "lora/lora_rows.h"
#include "lora_test_util.h"

namespace rapide::testing {
namespace {

// A row of the mixed batch: a sequence run with an adapter.
struct Stream {
  std::vector<int32_t> prompt;
  int32_t adapter = kBaseAdapter;
};

// Every stream alone: its prompt as one batch, then `steps` greedy tokens one at a time.
// Returns the logits of every prompt position and of every step, in order.
std::vector<std::vector<float>> alone(Model& model, const Stream& s, int steps, ThreadPool& pool) {
  const int vocab = model.config().vocab_size;
  ContiguousKvStore kv(model.config(), 1, static_cast<int>(s.prompt.size()) + steps);
  std::vector<std::vector<float>> out;
  Batch batch;
  for (size_t p = 0; p < s.prompt.size(); ++p) {
    batch.add(s.prompt[p], 0, static_cast<int>(p), true, s.adapter);
  }
  std::span<const float> logits = model.forward(batch, kv, pool);
  for (size_t p = 0; p < s.prompt.size(); ++p) {
    out.emplace_back(logits.begin() + p * vocab, logits.begin() + (p + 1) * vocab);
  }
  for (int step = 0; step < steps; ++step) {
    batch.clear();
    batch.add(top_two(out.back().data(), vocab).best, 0, static_cast<int>(s.prompt.size()) + step,
              true, s.adapter);
    logits = model.forward(batch, kv, pool);
    out.emplace_back(logits.begin(), logits.end());
  }
  return out;
}

class LoraBatch : public ::testing::Test {
 protected:
  void SetUp() override { RAPIDE_REQUIRE_SHARED(kBaseModel); }
  ThreadPool pool_{2};
};

// Four adapters (two files, two forms, three scales, different targets and ranks) and the
// base; the same prompt under several adapters, so a row given its neighbour's adapter, or a
// neighbour's KV, would show. Prompts are fed 16 positions per sequence per pass, round robin,
// then all streams decode together (the batch: 6 rows, the streaming kernels' regime) while
// each alone decodes one row at a time.
TEST_F(LoraBatch, MixedAdaptersGiveEachRowWhatItGetsAlone) {
  LoadedForTest t = load_for_test(shared_path(kBaseModel));
  const int a1 = add_adapter(t, "a1", lora_path("adapters/lora-a.gguf"), 1.0f);
  const int a05 = add_adapter(t, "a05", lora_path("adapters/lora-a.gguf"), 0.5f);
  const int b1 = add_adapter(t, "b1", lora_path("adapters/lora-b.gguf"), 1.0f);
  const int pb = add_adapter(t, "peft-b", lora_path("adapters/peft-lora-b"), 0.3f);
  std::vector<ReferenceSequence> seqs = read_reference_sequences(shared_path(kTokens));
  const auto tokens = [&](const std::string& name) {
    for (const ReferenceSequence& s : seqs) {
      if (s.name == name) return s.tokens;
    }
    throw std::runtime_error("no sequence " + name);
  };
  const std::vector<Stream> streams = {
      {tokens("story64"), kBaseAdapter}, {tokens("story64"), a1}, {tokens("short16"), a05},
      {tokens("story64"), b1},           {tokens("short16"), pb}, {tokens("short16"), a1},
  };
  constexpr int kSteps = 12;
  Model& model = *t.model;
  const int vocab = model.config().vocab_size;
  std::vector<std::vector<std::vector<float>>> expected;
  for (const Stream& s : streams) expected.push_back(alone(model, s, kSteps, pool_));
  // The adapters matter here: a stream's logits differ from the base stream's on its prompt.
  EXPECT_NE(expected[0][10], expected[1][10]);
  EXPECT_NE(expected[1][10], expected[3][10]);

  const int n = static_cast<int>(streams.size());
  ContiguousKvStore kv(model.config(), n, 64 + kSteps);
  size_t longest = 0;
  for (const Stream& s : streams) longest = std::max(longest, s.prompt.size());
  std::vector<std::vector<float>> last(n);
  for (size_t start = 0; start < longest; start += 16) {
    Batch batch;
    std::vector<std::pair<int, size_t>> rows;
    for (int s = 0; s < n; ++s) {
      const std::vector<int32_t>& p = streams[s].prompt;
      for (size_t pos = start; pos < std::min(start + 16, p.size()); ++pos) {
        batch.add(p[pos], s, static_cast<int>(pos), true, streams[s].adapter);
        rows.emplace_back(s, pos);
      }
    }
    const std::span<const float> logits = model.forward(batch, kv, pool_);
    for (size_t r = 0; r < rows.size(); ++r) {
      const auto [s, pos] = rows[r];
      const std::vector<float> row(logits.begin() + r * vocab, logits.begin() + (r + 1) * vocab);
      ASSERT_EQ(row, expected[s][pos]) << "stream " << s << " position " << pos;
      if (pos + 1 == streams[s].prompt.size()) last[s] = row;
    }
  }
  for (int step = 0; step < kSteps; ++step) {
    Batch batch;
    for (int s = 0; s < n; ++s) {
      batch.add(top_two(last[s].data(), vocab).best, s,
                static_cast<int>(streams[s].prompt.size()) + step, true, streams[s].adapter);
    }
    const std::span<const float> logits = model.forward(batch, kv, pool_);
    for (int s = 0; s < n; ++s) {
      last[s].assign(logits.begin() + s * vocab, logits.begin() + (s + 1) * vocab);
      ASSERT_EQ(last[s], expected[s][streams[s].prompt.size() + step])
          << "stream " << s << " step " << step;
    }
  }
}

TEST_F(LoraBatch, AdapterIndicesAreChecked) {
  LoadedForTest t = load_for_test(shared_path(kBaseModel));
  add_adapter(t, "a", lora_path("adapters/lora-a.gguf"), 1.0f);
  ContiguousKvStore kv(t.model->config(), 1, 4);
  Batch batch;
  batch.add(1, 0, 0, true, 1);  // only adapter 0 exists
  EXPECT_THROW(t.model->forward(batch, kv, pool_), Error);
  try {
    add_adapter(t, "a", lora_path("adapters/lora-b.gguf"), 1.0f);
    ADD_FAILURE() << "a second adapter named 'a' was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.what();
  }
  EXPECT_EQ(t.model->find_lora("a"), 0);
  EXPECT_EQ(t.model->find_lora("b"), -1);
}

// A random adapter of `rank` for a [in -> out] projection, as F32 (or F16) matrices.
struct RandomPair {
  std::vector<float> a, b;
  std::vector<uint16_t> a16, b16;
  LoraWeights weights;
};

RandomPair random_pair(int64_t in, int64_t out, int64_t rank, float scale, TensorType type,
                       uint32_t seed) {
  RandomPair p;
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.3f);
  p.a.resize(rank * in);
  p.b.resize(out * rank);
  for (float& x : p.a) x = normal(rng);
  for (float& x : p.b) x = normal(rng);
  const auto view = [&](std::vector<float>& f, std::vector<uint16_t>& h, int64_t cols,
                        int64_t rows) {
    if (type == TensorType::kF32) {
      return TensorView{
          "t", type, {cols, rows}, reinterpret_cast<const uint8_t*>(f.data()), f.size() * 4};
    }
    h.resize(f.size());
    quantize_row(TensorType::kF16, f.data(), h.data(), static_cast<int64_t>(f.size()));
    return TensorView{
        "t", type, {cols, rows}, reinterpret_cast<const uint8_t*>(h.data()), h.size() * 2};
  };
  p.weights.a = WeightMatrix::prepare(view(p.a, p.a16, in, rank));
  p.weights.b = WeightMatrix::prepare(view(p.b, p.b16, rank, out));
  p.weights.scale = scale;
  return p;
}

// LoraRows against its scalar reference, for rows of 3 adapters and the base interleaved (so
// groups are gathered), 1 to 40 rows (the streaming and the batched kernel regimes), F32 and
// F16 adapters: every adapted row equals the reference on that row alone, bit for bit, and
// base rows, and rows of an adapter that leaves the target alone, keep y as it was.
TEST(LoraRows, SegmentedProductsMatchTheReferenceRowByRow) {
  constexpr int64_t kIn = 96, kOut = 80;
  ThreadPool pool(2);
  for (const TensorType type : {TensorType::kF32, TensorType::kF16}) {
    std::vector<RandomPair> pairs;
    pairs.push_back(random_pair(kIn, kOut, 8, 2.0f, type, 1));
    pairs.push_back(random_pair(kIn, kOut, 4, 0.5f, type, 2));
    std::vector<std::shared_ptr<const LoraAdapter>> adapters;
    for (int i = 0; i < 3; ++i) {
      auto a = std::make_shared<LoraAdapter>("x" + std::to_string(i), "mem", "test", 1, 1.0f);
      // Adapter 2 adapts another target only.
      if (i < 2) {
        RandomPair& p = pairs[i];
        LoraWeights w;
        w.a = std::move(p.weights.a);
        w.b = std::move(p.weights.b);
        w.scale = p.weights.scale;
        a->set(0, LoraTarget::kV, std::move(w));
      } else {
        RandomPair other = random_pair(kIn, kOut, 2, 1.0f, type, 3);
        a->set(0, LoraTarget::kUp, std::move(other.weights));
      }
      adapters.push_back(std::move(a));
    }
    for (const int n : {1, 3, 8, 9, 40}) {
      std::mt19937 rng(static_cast<uint32_t>(n));
      std::normal_distribution<float> normal(0.0f, 1.0f);
      std::vector<float> x(n * kIn), y(n * kOut);
      for (float& v : x) v = normal(rng);
      for (float& v : y) v = normal(rng);
      std::vector<int32_t> which(n);
      for (int i = 0; i < n; ++i) which[i] = static_cast<int32_t>(i % 4) - 1;  // -1, 0, 1, 2
      LoraRows rows;
      rows.plan(which, n);
      ASSERT_EQ(rows.empty(), n == 1);  // one row: the base's alone
      std::vector<float> got = y;
      rows.apply(adapters, 0, LoraTarget::kV, x.data(), got.data(), pool);
      for (int i = 0; i < n; ++i) {
        std::vector<float> want(y.begin() + i * kOut, y.begin() + (i + 1) * kOut);
        if (which[i] == 0 || which[i] == 1) {
          LoraRows::apply_reference(*adapters[which[i]]->find(0, LoraTarget::kV),
                                    x.data() + i * kIn, 1, want.data());
          EXPECT_NE(want, std::vector<float>(y.begin() + i * kOut, y.begin() + (i + 1) * kOut));
        }
        EXPECT_EQ(std::vector<float>(got.begin() + i * kOut, got.begin() + (i + 1) * kOut), want)
            << tensor_type_name(type) << " n " << n << " row " << i << " adapter " << which[i];
      }
    }
  }
}

}  // namespace
}  // namespace rapide::testing
