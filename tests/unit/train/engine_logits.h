// The inference engine's logits for a fixed stories260K prompt (F32 KV cache, no activation
// quantization): what the training tests compare trained, pruned and exported models with.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "model/contiguous_kv_store.h"
#include "model/model.h"

namespace rapide::train::testing {

inline const std::vector<int32_t> kPrompt = {1, 403, 407, 261, 378, 432, 322, 261};

inline std::vector<float> engine_logits(const std::string& path) {
  auto file = std::make_shared<const ModelFile>(load_model(path));
  Model model(file, ActQuant::kOff);
  ThreadPool pool(1);
  ContiguousKvStore kv(model.config(), 1, 64, KvType::kF32);
  Batch batch;
  for (size_t p = 0; p < kPrompt.size(); ++p) batch.add(kPrompt[p], 0, static_cast<int>(p), true);
  const auto logits = model.forward(batch, kv, pool);
  return {logits.begin(), logits.end()};
}

}  // namespace rapide::train::testing
