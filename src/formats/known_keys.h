// The rule that a GGUF file's metadata holds nothing rapide silently leaves out: every
// `<arch>.*` key (arch = general.architecture) is in the table of known keys for that
// architecture, either read (and the reading code refuses the values rapide does not
// compute) or known not to change the computation (with the reason); any other key is
// refused with one line naming it (kUnsupported). A key that changes the math and that
// rapide does not implement (yarn parameters, attention scales, multipliers, soft-caps of
// other architectures, window patterns, expert routing functions...) is therefore refused,
// never ignored.
//
// Other namespaces:
//   general.*, tokenizer.*   outside this rule (provenance, and the vocabulary, which
//                            tokenizer_from_gguf checks itself)
//   split.*                  a file split with llama-gguf-split: split.count > 1 is refused
//                            (rapide reads one file; merge it first); a count of 1 is a whole
//                            file
//   <another architecture>.* refused: keys of an architecture rapide runs, in a file of
//                            another one, mean the file does not say what it computes
//   anything else            ignored: llama.cpp reads no other namespace of a model file,
//                            so such keys cannot change the computation (uploaders' notes
//                            such as mradermacher.*, llama-quantize's quantize.imatrix.*)
//
// The table is kKnownKeys in known_keys.cpp; docs/architectures.md lists it per
// architecture. How a new architecture adds its keys is written above the table.
#pragma once

#include <span>
#include <string_view>

#include "formats/gguf_reader.h"

namespace rapide {

enum class KeyUse {
  kRead,      // read by config_from_gguf / describe_architecture into ModelConfig
  kNoEffect,  // left unread: it does not change what the model computes (`why` says why)
};

struct KnownKey {
  std::string_view suffix;         // the key after "<arch>."
  std::string_view architectures;  // "*": every architecture rapide runs; else a
                                   // space-separated list of GGUF architecture names
  KeyUse use;
  std::string_view why;  // what it sets (kRead) or why leaving it unread is exact (kNoEffect)
};

// The whole table, for documentation and tests.
std::span<const KnownKey> known_gguf_keys();

// The table's entry for `<architecture>.<suffix>`; nullptr when rapide does not know it.
const KnownKey* find_known_key(std::string_view architecture, std::string_view suffix);

// Applies the rule above to every key of `gguf`, whose general.architecture is
// `architecture` (one rapide runs). Throws kUnsupported naming the first unknown key.
void check_gguf_keys(const GgufFile& gguf, std::string_view architecture);

}  // namespace rapide
