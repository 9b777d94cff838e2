#include "formats/unused_tensors.h"

#include <algorithm>
#include <charconv>
#include <string>

#include "base/error.h"
#include "formats/architecture_list.h"

namespace rapide {
namespace {

// Tensors a file may hold that rapide deliberately leaves out, each with the reason it does
// not change what the model computes. `architectures` is "*" (every one) or a
// space-separated list of GGUF architecture names. Keep this list short and every entry
// provable: a tensor that changes the math belongs in the architecture's description
// (model_config.h, Model's constructor) or must stay refused.
//
// Deliberately NOT here (they change the computation, so a file with them is refused until
// rapide implements them):
//   rope_freqs.weight (Llama 3.1+ per-frequency rope divisors),
//   output.weight of gemma2: llama.cpp's gemma2 never creates it, so its loader refuses such
//     a file ("wrong number of tensors"); a checkpoint with its own head differs from the
//     tied one rapide would compute,
//   blk.N.attn_output.bias, blk.N.ffn_*.bias and the like (llama.cpp reads them when
//     present).
// llama.cpp itself refuses a GGUF with a tensor it does not create, so every tensor of a
// file it runs is part of its computation; the GGUF entries are the tensors it creates but
// does not always compute with.
struct IgnoredTensor {
  std::string_view format;
  std::string_view architectures;
  std::string_view pattern;
  const char* why;
  // Non-empty: the entry applies only when the Model took this tensor instead (one of a
  // pair of alternatives), never when it took neither.
  std::string_view instead = {};
};
constexpr IgnoredTensor kIgnoredTensors[] = {
    // Older transformers versions saved the rotary inverse frequencies as a buffer. They are
    // base^(-2i/head_dim), recomputed from rope_theta and head_dim (llama.cpp's converter
    // drops them too); rope scaling that would change them is refused by config.json's
    // rope_scaling check (hf_config_keys.h).
    {"hf", "*", "model.layers.N.self_attn.rotary_emb.inv_freq",
     "the rotary inverse frequencies, recomputed from rope_theta and head_dim"},
    // LongRoPE (Phi-3 128k) carries two factor sets; llama.cpp (and the Model, through
    // set_serving_context) rotates with the short one when the serving context fits the
    // original context and with the long one otherwise, so a run that took one of them
    // leaves the other out. Hugging Face folders get both as tensors made from rope_scaling.
    {"gguf", "*", "rope_factors_long.weight",
     "LongRoPE's long-context factors, unused while the serving context fits the original",
     "rope_factors_short.weight"},
    {"gguf", "*", "rope_factors_short.weight",
     "LongRoPE's short-context factors, unused when the serving context exceeds the original",
     "rope_factors_long.weight"},
    {"hf", "*", "rope_factors_long.weight",
     "LongRoPE's long-context factors (from rope_scaling.long_factor), unused while the "
     "serving context fits the original",
     "rope_factors_short.weight"},
    {"hf", "*", "rope_factors_short.weight",
     "LongRoPE's short-context factors (from rope_scaling.short_factor), unused when the "
     "serving context exceeds the original",
     "rope_factors_long.weight"},
};

// `name` matches `pattern` with each dot-separated component "N" standing for a layer index.
bool matches(std::string_view pattern, std::string_view name) {
  while (!pattern.empty()) {
    const size_t pe = pattern.find('.');
    const std::string_view part = pattern.substr(0, pe);
    const size_t ne = name.find('.');
    const std::string_view got = name.substr(0, ne);
    if (part == "N") {
      if (got.empty() || got.find_first_not_of("0123456789") != std::string_view::npos) {
        return false;
      }
    } else if (part != got) {
      return false;
    }
    if ((pe == std::string_view::npos) != (ne == std::string_view::npos)) return false;
    if (pe == std::string_view::npos) return true;
    pattern.remove_prefix(pe + 1);
    name.remove_prefix(ne + 1);
  }
  return name.empty();
}

// The layer of a "blk.N.<rest>" name; -1 for the tensors outside the blocks.
int layer_of(std::string_view name) {
  if (!name.starts_with("blk.")) return -1;
  name.remove_prefix(4);
  int layer = -1;
  const auto [end, ec] = std::from_chars(name.data(), name.data() + name.size(), layer);
  if (ec != std::errc() || end == name.data() + name.size() || *end != '.') return -1;
  return layer;
}

}  // namespace

const char* ignored_tensor_reason(std::string_view format, std::string_view architecture,
                                  std::string_view name, const TensorUseLog* used) {
  for (const IgnoredTensor& t : kIgnoredTensors) {
    if (t.format == format && architecture_listed(t.architectures, architecture) &&
        matches(t.pattern, name) &&
        (t.instead.empty() || (used != nullptr && used->contains(std::string(t.instead))))) {
      return t.why;
    }
  }
  return nullptr;
}

void refuse_unused_tensors(const ModelFile& file, const TensorScope& scope) {
  const int file_layers = file.config.n_layers;
  for (const TensorView& t : file.tensors) {
    const int layer = layer_of(t.name);
    // Another pipeline stage's layer (that stage checks it), or, on a stage that does not
    // hold both the embedding and the head, a tensor outside the blocks: no stage takes all
    // of those, so only a run of the whole model checks them.
    const bool other_stage =
        layer >= 0 ? layer < file_layers &&
                         (layer < scope.first_layer || layer >= scope.first_layer + scope.n_layers)
                   : !scope.top_level;
    if (other_stage || file.used.contains(t.name)) continue;
    if (ignored_tensor_reason(file.format, file.config.architecture, t.name, &file.used) !=
        nullptr) {
      continue;
    }
    fail(ErrorCode::kUnsupported,
         "'{}': tensor '{}' is not used by rapide's {} architecture, and leaving it out could "
         "change the results (refusing rather than guessing; docs/architectures.md lists what "
         "rapide reads)",
         file.path, t.name, file.config.architecture);
  }
}

}  // namespace rapide
