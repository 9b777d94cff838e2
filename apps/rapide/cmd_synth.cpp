// rapide synth: writes a random-weight GGUF of a chosen architecture (llama, qwen3, gemma3,
// deepseek2), shape and weight type, with the vocabulary of an existing GGUF, for benchmarks
// that need a model of realistic size (synth100m: 124.7 M parameters with the 32000-token
// Llama-2 vocabulary; the other architectures' synth100m read about as many weight bytes per
// decoded token, formats/synth_shape.h). The keys and tensors are formats/synth_layout.h's.
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
#include "formats/gguf_reader.h"
#include "formats/gguf_writer.h"
#include "formats/quant_plan.h"
#include "formats/synth_layout.h"
#include "formats/synth_shape.h"
#include "kernels/matmul.h"

namespace rapide::cli {
namespace {

struct SynthOptions {
  std::string arch = "llama";
  std::string shape = "synth100m";
  std::string type = "q8_0";
  std::string vocab_from;
  std::string output;
  uint64_t seed = 1;
};

constexpr float kWeightStd = 0.02f;

int64_t element_count(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// Every weight matrix's rows must be whole blocks of `type`.
void check_rows(const std::vector<SynthTensor>& tensors, TensorType type, const SynthOptions& o,
                SynthArch arch) {
  const int64_t block = tensor_type_block_size(type);
  for (const SynthTensor& t : tensors) {
    if (t.fill != SynthTensor::Fill::kWeights || t.shape[0] % block == 0) continue;
    if (arch == SynthArch::kLlama) {
      fail(ErrorCode::kInvalidArgument, "--type {} needs dim and ffn to be multiples of {}", o.type,
           block);
    }
    fail(ErrorCode::kInvalidArgument,
         "--type {} needs weight rows that are multiples of {}: {} has rows of {}", o.type, block,
         t.name, t.shape[0]);
  }
}

void run_synth(const SynthOptions& o) {
  const std::optional<SynthArch> arch = synth_arch_from_name(o.arch);
  if (!arch) {
    fail(ErrorCode::kInvalidArgument, "--arch '{}': use llama, qwen3, gemma3 or deepseek2", o.arch);
  }
  SynthShape s = parse_synth_shape(*arch, o.shape, "--shape");
  const std::optional<TensorType> type = tensor_type_from_name(o.type);
  if (!type)
    fail(ErrorCode::kInvalidArgument,
         "--type '{}': use f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q2_K, q3_K, q4_K, q5_K, "
         "q6_K, iq4_nl or iq4_xs (any case)",
         o.type);
  const GgufFile vocab = GgufFile::open(o.vocab_from);
  const int64_t n_vocab =
      static_cast<int64_t>(vocab.get_array("tokenizer.ggml.tokens").items.size());
  s.base.vocab = n_vocab;
  const std::vector<SynthTensor> tensors = synth_tensors(s);
  check_rows(tensors, *type, o, *arch);

  GgufWriter w;
  std::string name = o.shape == "synth100m" ? "synth100m" : "synth";
  if (*arch != SynthArch::kLlama) name += std::string("-") + synth_arch_name(*arch);
  set_synth_hyperparameters(w, s);
  w.set("general.name", GgufValue::string(name));
  w.set("general.file_type", GgufValue::u32(llama_file_type(*type)));
  w.set("general.quantization_version", GgufValue::u32(2));
  for (const auto& kv : vocab.metadata()) {
    if (kv.key.starts_with("tokenizer.")) w.set(kv.key, kv.value);
  }

  uint64_t parameters = 0;
  double read_bytes = 0;  // per decoded token
  uint64_t stream = 0;    // each random tensor draws from its own seeded generator
  for (const SynthTensor& t : tensors) {
    const int64_t cols = t.shape[0];
    const int64_t rows = element_count(t.shape) / cols;
    const TensorType tt = t.fill == SynthTensor::Fill::kWeights ? *type : TensorType::kF32;
    if (t.fill == SynthTensor::Fill::kOnes) {
      const std::vector<float> ones(static_cast<size_t>(cols * rows), 1.0f);
      w.add_tensor(t.name, tt, t.shape, ones.data(), ones.size() * 4);
    } else {
      const uint64_t seed = o.seed * 0x9E3779B97F4A7C15ull + ++stream;
      w.add_tensor(t.name, tt, t.shape, [=](uint8_t* out) {
        std::mt19937_64 rng(seed);
        std::normal_distribution<float> normal(0.0f, kWeightStd);
        std::vector<float> row(static_cast<size_t>(cols));
        const int64_t row_bytes = tensor_row_bytes(tt, cols);
        for (int64_t r = 0; r < rows; ++r) {
          for (float& x : row) x = normal(rng);
          quantize_row(tt, row.data(), out + r * row_bytes, cols);
        }
      });
    }
    parameters += static_cast<uint64_t>(cols * rows);
    read_bytes += t.read_share * static_cast<double>(tensor_row_bytes(tt, cols) * rows);
  }

  std::fprintf(stderr, "writing %s: %s %s, %.1f M parameters, %s weights, vocab %lld from %s\n",
               o.output.c_str(), o.arch.c_str(), o.shape.c_str(), parameters / 1e6, o.type.c_str(),
               static_cast<long long>(n_vocab), o.vocab_from.c_str());
  w.write(o.output, write_progress_printer());
  const double mib = static_cast<double>(w.tensor_data_bytes()) / (1 << 20);
  std::printf("wrote %s: %.1f M parameters, %.1f MiB of %s tensor data\n", o.output.c_str(),
              parameters / 1e6, mib, o.type.c_str());
  std::printf(
      "per decoded token: %.1f MiB of weights read; K/V: %lld values a position (%lld with K and "
      "V expanded per head)\n",
      read_bytes / (1 << 20), static_cast<long long>(s.kv_values_per_position()),
      static_cast<long long>(s.expanded_kv_values_per_position()));
}

}  // namespace

void register_synth(CLI::App& app) {
  auto o = std::make_shared<SynthOptions>();
  CLI::App* cmd = app.add_subcommand(
      "synth",
      "Write a random-weight GGUF (llama, qwen3, gemma3, deepseek2) of a given shape "
      "(for benchmarks)");
  cmd->add_option("--arch", o->arch,
                  "llama | qwen3 (per-head q/k norms, untied output) | gemma3 (sandwich norms, "
                  "q/k norms, sliding window, tied output) | deepseek2 (MLA, leading dense "
                  "layers, sigmoid-routed and shared experts)")
      ->capture_default_str();
  cmd->add_option(
         "--shape", o->shape,
         "synth100m (per --arch: about synth100m's weight bytes per token), or key=value items "
         "that replace its values. Every arch: dim=768,layers=12,heads=12,ffn=2048,ctx=2048; "
         "llama, qwen3, gemma3: kv_heads=4; qwen3, gemma3: head_dim=64 (default dim/heads); "
         "gemma3: window=512,rope_scale=1 (8: linear rope scaling, as 4B+); deepseek2 (ctx "
         "4096): q_lora=256,kv_lora=256,nope=128,rope=64,v_dim=128,experts=8,experts_used=2,"
         "expert_ffn=512,shared_experts=1,dense_layers=1")
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
