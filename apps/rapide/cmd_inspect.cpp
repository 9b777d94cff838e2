// rapide inspect MODEL: what a model file holds (format, hyper-parameters, tensors,
// tokenizer, special tokens, chat template), as text or --json.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "apps/rapide/commands.h"
#include "formats/gguf_reader.h"
#include "formats/model_file.h"
#include "formats/model_summary.h"

namespace rapide::cli {
namespace {

struct InspectOptions {
  std::string model_path;
  std::string tokenizer_path;
  bool json = false;
  bool metadata = false;
};

const char* kind_name(TokenizerKind kind) {
  switch (kind) {
    case TokenizerKind::kNone:
      return "none";
    case TokenizerKind::kSentencePiece:
      return "sentencepiece";
    case TokenizerKind::kByteLevelBpe:
      return "byte-level-bpe";
  }
  return "unknown";
}

std::string human_bytes(uint64_t bytes) {
  if (bytes >= (uint64_t{1} << 30)) return fmt::format("{:.2f} GiB", bytes / double(1 << 30));
  if (bytes >= (uint64_t{1} << 20)) return fmt::format("{:.2f} MiB", bytes / double(1 << 20));
  if (bytes >= 1024) return fmt::format("{:.1f} KiB", bytes / 1024.0);
  return fmt::format("{} B", bytes);
}

std::string human_count(uint64_t n) {
  if (n >= 1000000000) return fmt::format("{:.2f} B", n / 1e9);
  if (n >= 1000000) return fmt::format("{:.2f} M", n / 1e6);
  if (n >= 1000) return fmt::format("{:.1f} K", n / 1e3);
  return fmt::format("{}", n);
}

std::string token_text(const TokenizerData& t, int32_t id) {
  if (id < 0 || static_cast<size_t>(id) >= t.tokens.size()) return "";
  return t.tokens[id];
}

// Which layers ModelConfig::sliding_window applies to.
// "all", "even" (gemma2's period 2), "3 of every 4" (cohere2), "5 of every 6" (gemma3).
std::string window_layers_name(const ModelConfig& c) {
  if (c.sliding_window <= 0 || c.window_layers == WindowLayers::kNone) return "none";
  if (c.window_layers == WindowLayers::kAll) return "all";
  if (c.window_period == 2) return "even";
  return fmt::format("{} of every {}", c.window_period - 1, c.window_period);
}

// The parts of the block description beyond a llama block, one phrase each (empty: none).
std::vector<std::string> block_features(const ModelConfig& c) {
  std::vector<std::string> f;
  if (c.rope_dim > 0 && !c.mla())
    f.push_back(fmt::format("partial rotary {} of {} dims", c.rope_dim, c.head_dim));
  if (c.rope_freq_factors) f.push_back("Llama 3 rope factors (rope_freqs.weight)");
  if (c.rope_scaling == RopeScaling::kYarn) {
    f.push_back(
        fmt::format("YaRN rope scaling x{:g} from context {}", c.rope_scale, c.rope_orig_context));
  } else if (c.rope_scaling == RopeScaling::kLongRope) {
    f.push_back(fmt::format("LongRoPE (original context {})", c.rope_orig_context));
  }
  if (c.rope_theta_local > 0)
    f.push_back(fmt::format("local layers' rope base {:g}", c.rope_theta_local));
  if (!c.rope_on_global_layers) f.push_back("no rope on global layers");
  if (c.norm_kind == NormKind::kLayer) f.push_back("LayerNorm");
  if (!c.pre_norms) f.push_back("no pre-norms");
  if (c.post_norms) f.push_back("post-norms");
  if (c.qk_norm == QkNorm::kPerHead) f.push_back("q/k RMSNorm per head");
  if (c.qk_norm == QkNorm::kWhole) f.push_back("q/k RMSNorm over all heads");
  if (c.parallel_block) f.push_back("parallel attention and FFN");
  if (c.embedding_scale != 0) f.push_back(fmt::format("embeddings x{:g}", c.embedding_scale));
  if (c.residual_scale != 1) f.push_back(fmt::format("residual x{:g}", c.residual_scale));
  if (c.logit_scale != 1) f.push_back(fmt::format("logits x{:g}", c.logit_scale));
  if (c.query_scale != 0) f.push_back(fmt::format("attention scale {:g}", c.query_scale));
  return f;
}

nlohmann::json to_json(const ModelFile& m, const GgufFile* gguf) {
  using nlohmann::json;
  const ModelConfig& c = m.config;
  json out;
  out["path"] = m.path;
  out["format"] = m.format;
  if (gguf) out["gguf_version"] = gguf->version();
  out["config"] = {{"architecture", c.architecture},
                   {"name", c.name},
                   {"dim", c.dim},
                   {"n_layers", c.n_layers},
                   {"n_heads", c.n_heads},
                   {"n_kv_heads", c.n_kv_heads},
                   {"head_dim", c.head_dim},
                   {"ffn_dim", c.ffn_dim},
                   {"vocab_size", c.vocab_size},
                   {"max_context", c.max_context},
                   {"rms_eps", c.rms_eps},
                   {"rope_theta", c.rope_theta},
                   {"rope_scale", c.rope_scale},
                   {"rope_style", c.rope_style == RopeStyle::kNeox ? "neox" : "normal"},
                   {"tied_embeddings", c.tied_embeddings},
                   {"qkv_bias", c.qkv_bias},
                   {"sliding_window", c.sliding_window},
                   {"window_layers", window_layers_name(c)},
                   {"attn_softcap", c.attn_softcap},
                   {"final_softcap", c.final_softcap},
                   {"block", block_features(c)},
                   {"n_experts", c.n_experts},
                   {"n_experts_used", c.n_experts_used},
                   {"shared_expert_ffn_dim", c.shared_expert_ffn_dim}};
  json tensors = json::array();
  for (const auto& t : m.tensors) {
    tensors.push_back({{"name", t.name},
                       {"type", tensor_type_name(t.type)},
                       {"shape", t.shape},
                       {"bytes", t.size_bytes}});
  }
  out["tensors"] = tensors;
  out["parameters"] = summarize_model(m).parameters;
  const KvFootprint kv = kv_footprint(c);
  out["kv_bytes_per_token_f16"] = kv.bytes_per_token;
  if (c.mla()) {
    out["config"]["mla"] = {{"q_lora_rank", c.q_lora_rank},
                            {"kv_lora_rank", c.kv_lora_rank},
                            {"nope_dim", c.mla_nope_dim},
                            {"rope_dim", c.mla_rope_dim},
                            {"v_dim", c.mla_v_dim}};
    out["kv_expanded_bytes_per_token_f16"] = kv.expanded_bytes_per_token;
  }
  out["total_tensor_bytes"] = m.total_tensor_bytes();
  const TokenizerData& t = m.tokenizer;
  auto special = [&](int32_t id) { return json{{"id", id}, {"text", token_text(t, id)}}; };
  out["tokenizer"] = {{"kind", kind_name(t.kind)},
                      {"vocab_size", t.tokens.size()},
                      {"merges", t.merges.size()},
                      {"pre", t.pre},
                      {"bos", special(t.bos_id)},
                      {"eos", special(t.eos_id)},
                      {"unk", special(t.unk_id)},
                      {"pad", special(t.pad_id)},
                      {"add_bos", t.add_bos},
                      {"add_eos", t.add_eos},
                      {"add_space_prefix", t.add_space_prefix},
                      {"chat_template", !t.chat_template.empty()}};
  if (gguf) {
    json metadata = json::object();
    for (const auto& kv : gguf->metadata()) {
      metadata[kv.key] = {{"type", gguf_type_name(kv.value.type)}, {"value", kv.value.to_string()}};
    }
    out["metadata"] = metadata;
  }
  return out;
}

void print_text(const ModelFile& m, const GgufFile* gguf, bool all_metadata) {
  const ModelConfig& c = m.config;
  fmt::print("file:            {}\n", m.path);
  fmt::print(
      "format:          {}{}\n", m.format,
      gguf ? fmt::format(" v{} ({} metadata keys)", gguf->version(), gguf->metadata().size()) : "");
  fmt::print("architecture:    {}   name: {}\n", c.architecture, c.name);
  fmt::print("hyper-parameters:\n");
  fmt::print("  dim {}  layers {}  heads {}  kv_heads {}  head_dim {}  ffn {}\n", c.dim, c.n_layers,
             c.n_heads, c.n_kv_heads, c.head_dim, c.ffn_dim);
  fmt::print("  vocab {}  context {}  rms_eps {:g}  rope_theta {:g}  rope_scale {:g}  rope {}\n",
             c.vocab_size, c.max_context, c.rms_eps, c.rope_theta, c.rope_scale,
             c.rope_style == RopeStyle::kNeox ? "neox" : "normal");
  fmt::print("  tied_embeddings {}  qkv_bias {}\n", c.tied_embeddings ? "yes" : "no",
             c.qkv_bias ? "yes" : "no");
  if (c.sliding_window > 0) {
    // Whether the engine can free KV outside the window (every layer) or not (gemma2).
    fmt::print("  sliding window {} on {} layers{}\n", c.sliding_window, window_layers_name(c),
               c.every_layer_window() > 0 ? " (the engine frees KV outside it)" : "");
  }
  if (c.attn_softcap > 0 || c.final_softcap > 0) {
    fmt::print("  soft-caps: attention {:g}  final {:g}\n", c.attn_softcap, c.final_softcap);
  }
  if (const std::vector<std::string> f = block_features(c); !f.empty()) {
    fmt::print("  block: {}\n", fmt::join(f, ", "));
  }
  if (c.n_experts > 0) {
    fmt::print("  experts {} ({} per token){}\n", c.n_experts, c.n_experts_used,
               c.shared_expert_ffn_dim > 0
                   ? fmt::format(", shared expert ffn {}", c.shared_expert_ffn_dim)
                   : "");
  }
  if (c.n_experts > 0 && (c.expert_gating == ExpertGating::kSigmoid || c.expert_selection_bias ||
                          c.expert_weights_scale != 1.0f || c.leading_dense_layers > 0)) {
    fmt::print("  routing: {} scores{}, weights{} x {:g}; first {} layers dense\n",
               c.expert_gating == ExpertGating::kSigmoid ? "sigmoid" : "softmax",
               c.expert_selection_bias ? ", chosen with exp_probs_b.bias" : "",
               c.normalize_expert_weights ? " renormalised" : "", c.expert_weights_scale,
               c.leading_dense_layers);
  }
  if (c.mla()) {
    fmt::print("  multi-head latent attention: q_lora {}  kv_lora {}  nope {}  rope {}  v {}\n",
               c.q_lora_rank, c.kv_lora_rank, c.mla_nope_dim, c.mla_rope_dim, c.mla_v_dim);
  }
  if (c.n_layers > 0) {
    const KvFootprint kv = kv_footprint(c);
    if (c.mla()) {
      // The latent row (K and V copies) against per-head K and V as llama.cpp caches them.
      fmt::print(
          "kv cache (f16):  {} per token: latent rows of {} (x2, K and V) in {} layers; expanded "
          "per-head K/V would take {} ({:.1f}x)\n",
          human_bytes(kv.bytes_per_token), c.kv_lora_rank + c.mla_rope_dim, c.n_layers,
          human_bytes(kv.expanded_bytes_per_token),
          static_cast<double>(kv.expanded_bytes_per_token) /
              static_cast<double>(kv.bytes_per_token));
    } else {
      fmt::print("kv cache (f16):  {} per token\n", human_bytes(kv.bytes_per_token));
    }
  }
  fmt::print("parameters:      {} ({} of tensor data)\n",
             human_count(summarize_model(m).parameters), human_bytes(m.total_tensor_bytes()));

  size_t width = 4;
  for (const auto& t : m.tensors) width = std::max(width, t.name.size());
  fmt::print("tensors ({}):\n", m.tensors.size());
  fmt::print("  {:<{}}  {:<5}  {:<18}  {:>12}\n", "name", width, "type", "shape", "bytes");
  for (const auto& t : m.tensors) {
    fmt::print("  {:<{}}  {:<5}  {:<18}  {:>12}\n", t.name, width, tensor_type_name(t.type),
               fmt::format("[{}]", fmt::join(t.shape, ", ")), t.size_bytes);
  }
  fmt::print("  {:<{}}  {:<5}  {:<18}  {:>12}  ({})\n", "total", width, "", "",
             m.total_tensor_bytes(), human_bytes(m.total_tensor_bytes()));

  const TokenizerData& t = m.tokenizer;
  fmt::print("tokenizer:       {}, {} tokens", kind_name(t.kind), t.tokens.size());
  if (!t.merges.empty()) fmt::print(", {} merges", t.merges.size());
  if (!t.pre.empty()) fmt::print(", pre '{}'", t.pre);
  fmt::print("\n");
  auto special = [&](const char* what, int32_t id) {
    if (id < 0) return fmt::format("{} none", what);
    return fmt::format("{} {} {}", what, id, GgufValue::string(token_text(t, id)).to_string());
  };
  fmt::print("  {}  {}  {}  {}\n", special("bos", t.bos_id), special("eos", t.eos_id),
             special("unk", t.unk_id), special("pad", t.pad_id));
  fmt::print("  add_bos {}  add_eos {}  add_space_prefix {}\n", t.add_bos ? "yes" : "no",
             t.add_eos ? "yes" : "no", t.add_space_prefix ? "yes" : "no");
  fmt::print("chat template:   {}\n",
             t.chat_template.empty()
                 ? std::string("none")
                 : fmt::format("present ({} characters)", t.chat_template.size()));
  if (gguf) {
    fmt::print("metadata{}:\n", all_metadata ? "" : " (arrays shortened; --metadata for more)");
    for (const auto& kv : gguf->metadata()) {
      fmt::print("  {} ({}) = {}\n", kv.key, gguf_type_name(kv.value.type),
                 kv.value.to_string(all_metadata ? 64 : 4));
    }
  }
}

void run_inspect(const InspectOptions& options) {
  LoadOptions load;
  load.tokenizer_path = options.tokenizer_path;
  const ModelFile m = load_model(options.model_path, load);
  std::unique_ptr<GgufFile> gguf;
  if (m.format == "gguf") gguf = std::make_unique<GgufFile>(GgufFile::open(m.path));
  if (options.json) {
    std::puts(to_json(m, gguf.get()).dump(2).c_str());
  } else {
    print_text(m, gguf.get(), options.metadata);
  }
}

}  // namespace

void register_inspect(CLI::App& app) {
  auto options = std::make_shared<InspectOptions>();
  CLI::App* cmd = app.add_subcommand(
      "inspect", "Show a model's format, hyper-parameters, tensors and tokenizer");
  cmd->add_option("model", options->model_path, "GGUF file, llama2.c checkpoint or HF folder")
      ->required();
  cmd->add_option("--tokenizer", options->tokenizer_path,
                  "llama2.c tokenizer.bin (default: next to the checkpoint)");
  cmd->add_flag("--json", options->json, "machine-readable output");
  cmd->add_flag("--metadata", options->metadata, "print GGUF metadata arrays at greater length");
  cmd->callback([options] { run_inspect(*options); });
}

}  // namespace rapide::cli
