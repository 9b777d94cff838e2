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

// A nonzero 64-bit key of a LoRA adapter as loaded (its name, file, every pair's shape and
// scale, and the first row of each A and B): the prefix-cache chain of the K/V it computes
// (PrefixCache's `chain`). A reloaded adapter with other weights or another scale gets
// another key.
uint64_t adapter_identity(const LoraAdapter& adapter);

}  // namespace rapide
