// One forward pass's worth of work: a flat list of tokens from any number of sequences.
//
// Each token carries the sequence it belongs to (an index into the KV store's block
// tables), its position in that sequence, and whether the caller wants its logits.
// Tokens of one sequence must appear in increasing position order and directly continue
// what the KV store already holds for that sequence (positions 0..p-1 are cached).
// Each token may also name the LoRA adapter it runs with (an index of the model's adapters,
// Model::add_lora; -1 is the base model alone). `adapters` is either empty (every token runs
// the base: batches built without add(), such as a parallel rank's decoded pass) or one
// entry per token.
#pragma once

#include <cstdint>
#include <vector>

namespace rapide {

struct Batch {
  std::vector<int32_t> tokens;
  std::vector<int32_t> seq_ids;
  std::vector<int32_t> positions;
  std::vector<uint8_t> needs_logits;
  std::vector<int32_t> adapters;

  void add(int32_t token, int32_t seq_id, int32_t position, bool logits, int32_t adapter = -1) {
    tokens.push_back(token);
    seq_ids.push_back(seq_id);
    positions.push_back(position);
    needs_logits.push_back(logits ? 1 : 0);
    adapters.push_back(adapter);
  }
  void clear() {
    tokens.clear();
    seq_ids.clear();
    positions.clear();
    needs_logits.clear();
    adapters.clear();
  }
  int32_t adapter(int i) const { return adapters.empty() ? -1 : adapters[i]; }
  int size() const { return static_cast<int>(tokens.size()); }
  bool empty() const { return tokens.empty(); }
  int logits_count() const {
    int n = 0;
    for (uint8_t f : needs_logits) n += f;
    return n;
  }
};

}  // namespace rapide
