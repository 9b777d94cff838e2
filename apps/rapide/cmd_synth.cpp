// rapide synth: writes a random-weight Llama GGUF of a chosen shape and weight type, with the
// vocabulary of an existing GGUF, for benchmarks that need a model of realistic size
// (synth100m: 124.7 M parameters with the 32000-token Llama-2 vocabulary).
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "apps/rapide/commands.h"
#include "apps/rapide/write_progress.h"
#include "base/error.h"
#include "formats/quant_plan.h"
#include "formats/gguf_reader.h"
#include "formats/gguf_writer.h"
#include "formats/llama_shape.h"
#include "kernels/matmul.h"

namespace rapide::cli {
namespace {

// synth100m: 100 M parameters in matrices with a 32000-token vocabulary.
constexpr LlamaShape kSynth100m{
    .dim = 768, .layers = 12, .heads = 12, .kv_heads = 4, .ffn = 2048, .ctx = 2048};

struct SynthOptions {
  std::string shape = "synth100m";
  std::string type = "q8_0";
  std::string vocab_from;
  std::string output;
  uint64_t seed = 1;
};

constexpr float kWeightStd = 0.02f;

// "synth100m" or "dim=768,layers=12,heads=12,kv_heads=4,ffn=2048,ctx=2048" (keys missing
// from the list keep synth100m's values).
LlamaShape parse_shape(const std::string& text) {
  if (text == "synth100m") return kSynth100m;
  return parse_llama_shape(text, kSynth100m, "--shape");
}

void run_synth(const SynthOptions& o) {
  LlamaShape s = parse_shape(o.shape);
  const std::optional<TensorType> type = tensor_type_from_name(o.type);
  if (!type)
    fail(ErrorCode::kInvalidArgument,
         "--type '{}': use f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q2_K, q3_K, q4_K, q5_K, "
         "q6_K, iq4_nl or iq4_xs (any case)",
         o.type);
  const int64_t block = tensor_type_block_size(*type);
  if (s.dim % block != 0 || s.ffn % block != 0) {
    fail(ErrorCode::kInvalidArgument, "--type {} needs dim and ffn to be multiples of {}", o.type,
         block);
  }
  const GgufFile vocab = GgufFile::open(o.vocab_from);
  const int64_t n_vocab =
      static_cast<int64_t>(vocab.get_array("tokenizer.ggml.tokens").items.size());
  const int head_dim = s.head_dim();
  s.vocab = n_vocab;

  GgufWriter w;
  const std::string name = o.shape == "synth100m" ? "synth100m" : "synth";
  set_llama_hyperparameters(w, s);
  w.set("general.name", GgufValue::string(name));
  w.set("general.file_type", GgufValue::u32(llama_file_type(*type)));
  w.set("general.quantization_version", GgufValue::u32(2));
  for (const auto& kv : vocab.metadata()) {
    if (kv.key.starts_with("tokenizer.")) w.set(kv.key, kv.value);
  }

  uint64_t parameters = 0;
  uint64_t stream = 0;  // each tensor draws from its own seeded generator
  auto matrix = [&](const std::string& tensor, int64_t cols, int64_t rows) {
    const uint64_t seed = o.seed * 0x9E3779B97F4A7C15ull + ++stream;
    const TensorType t = *type;
    w.add_tensor(tensor, t, {cols, rows}, [=](uint8_t* out) {
      std::mt19937_64 rng(seed);
      std::normal_distribution<float> normal(0.0f, kWeightStd);
      std::vector<float> row(static_cast<size_t>(cols));
      const int64_t row_bytes = tensor_row_bytes(t, cols);
      for (int64_t r = 0; r < rows; ++r) {
        for (float& x : row) x = normal(rng);
        quantize_row(t, row.data(), out + r * row_bytes, cols);
      }
    });
    parameters += static_cast<uint64_t>(cols * rows);
  };
  auto norm = [&](const std::string& tensor) {
    const std::vector<float> ones(static_cast<size_t>(s.dim), 1.0f);
    w.add_tensor(tensor, TensorType::kF32, {s.dim}, ones.data(), ones.size() * 4);
    parameters += static_cast<uint64_t>(s.dim);
  };
  const int64_t q_dim = s.dim, kv_dim = static_cast<int64_t>(head_dim) * s.kv_heads;
  matrix("token_embd.weight", s.dim, n_vocab);
  for (int l = 0; l < s.layers; ++l) {
    const std::string b = fmt::format("blk.{}.", l);
    norm(b + "attn_norm.weight");
    matrix(b + "attn_q.weight", s.dim, q_dim);
    matrix(b + "attn_k.weight", s.dim, kv_dim);
    matrix(b + "attn_v.weight", s.dim, kv_dim);
    matrix(b + "attn_output.weight", q_dim, s.dim);
    norm(b + "ffn_norm.weight");
    matrix(b + "ffn_gate.weight", s.dim, s.ffn);
    matrix(b + "ffn_up.weight", s.dim, s.ffn);
    matrix(b + "ffn_down.weight", s.ffn, s.dim);
  }
  norm("output_norm.weight");
  matrix("output.weight", s.dim, n_vocab);

  std::fprintf(stderr, "writing %s: %s, %.1f M parameters, %s weights, vocab %lld from %s\n",
               o.output.c_str(), o.shape.c_str(), parameters / 1e6, o.type.c_str(),
               static_cast<long long>(n_vocab), o.vocab_from.c_str());
  w.write(o.output, write_progress_printer());
  const double mib = static_cast<double>(w.tensor_data_bytes()) / (1 << 20);
  std::printf("wrote %s: %.1f M parameters, %.1f MiB of %s tensor data\n", o.output.c_str(),
              parameters / 1e6, mib, o.type.c_str());
}

}  // namespace

void register_synth(CLI::App& app) {
  auto o = std::make_shared<SynthOptions>();
  CLI::App* cmd = app.add_subcommand(
      "synth", "Write a random-weight Llama GGUF of a given shape (for benchmarks)");
  cmd->add_option("--shape", o->shape,
                  "synth100m, or dim=768,layers=12,heads=12,kv_heads=4,ffn=2048,ctx=2048")
      ->capture_default_str();
  cmd->add_option("--type", o->type,
                  "weight type: f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q2_K, q3_K, q4_K, "
                  "q5_K, q6_K, iq4_nl, iq4_xs (any case)")
      ->capture_default_str();
  cmd->add_option("--vocab-from", o->vocab_from, "GGUF whose vocabulary and tokenizer to copy")
      ->required();
  cmd->add_option("-o,--output", o->output, "output GGUF path")->required();
  cmd->add_option("--seed", o->seed, "random seed")->capture_default_str();
  cmd->callback([o] { run_synth(*o); });
}

}  // namespace rapide::cli
