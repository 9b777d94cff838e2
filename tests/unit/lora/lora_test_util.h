// What the LoRA tests share: the files of tests/data/lora (llama.cpp's adapters and logits; its
// README says how llama.cpp made them), loading an adapter onto a base model, and one
// sequence's logits with an adapter.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "golden/greedy_runner.h"
#include "lora/lora_load.h"
#include "model/contiguous_kv_store.h"
#include "test_paths.h"

namespace rapide::testing {

inline const std::string kBaseModel = "reference/llamacpp/models/llama-q-F32.gguf";
inline const std::string kTokens = "reference/llamacpp/tokens.txt";

// The reference adapters and logits live in the repository (tests/data/lora): the base model
// they were made for is shared/reference/llamacpp's.
inline std::string lora_path(const std::string& relative) {
  return test_data_path("lora/" + relative);
}

// Loads `path` (a GGUF or a PEFT folder) for `t`'s model as `name` at `scale` and adds it;
// returns its index.
inline int add_adapter(LoadedForTest& t, const std::string& name, const std::string& path,
                       float scale) {
  return t.model->add_lora(load_lora(LoraSpec{name, path, scale}, *t.file));
}

// One sequence through the model as a single batch from an empty cache, every row with
// `adapter` and logits (how the references were made).
inline std::vector<float> adapter_logits(Model& model, const std::vector<int32_t>& tokens,
                                         int32_t adapter, ThreadPool& pool) {
  ContiguousKvStore kv(model.config(), 1, static_cast<int>(tokens.size()));
  Batch batch;
  for (size_t p = 0; p < tokens.size(); ++p) {
    batch.add(tokens[p], 0, static_cast<int>(p), true, adapter);
  }
  const std::span<const float> logits = model.forward(batch, kv, pool);
  return {logits.begin(), logits.end()};
}

}  // namespace rapide::testing
