// The identity prefix-cache blocks and offloaded KV files are stamped with: K/V are only
// valid for the model (weights, not just shape) and the KV layout that produced them.
#pragma once

#include <cstdint>

#include "kv/kv_store.h"
#include "model/model.h"

namespace rapide {

// A 64-bit key over the architecture, hyper-parameters, every tensor's name, type and shape,
// samples of every tensor's bytes (two fine-tunes of one shape differ there), and the KV
// layout. Reads a few hundred bytes per tensor, so it is cheap at start-up.
uint64_t model_identity(const Model& model, const KvLayout& layout);

}  // namespace rapide
