// Per-token cost of structured output's vocabulary mask (issue 19): a realistic JSON Schema
// response walked token by token over a real vocabulary (default: the 32000-token Llama-2
// vocabulary of ../shared's llama-2-tiny-random), timing at each token what the engine does
// before sampling: the mask lookup (or trie walk on a miss) and applying it to a logits row.
//
//   bench_grammar_mask [--model GGUF] [--repeat N]
//
// Prints: the trie build time; per-token times for a first request (cold cache: each new
// grammar state walks the trie) and later requests with the same schema (the cache shared
// by requests of one grammar); and the uncached trie walk per token (the worst case).
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <vector>

#include "api/structured_output.h"
#include "base/clock.h"
#include "base/percentile.h"
#include "formats/gguf_model.h"
#include "formats/gguf_reader.h"
#include "grammar/constraint.h"
#include "tokenizer/tokenizer.h"

using namespace rapide;

namespace {

constexpr const char* kSchema = R"({"type": "json_schema", "json_schema": {"name": "order",
  "schema": {"type": "object", "properties": {
    "id": {"type": "string", "format": "uuid"},
    "customer": {"type": "object", "properties": {"name": {"type": "string"},
                 "email": {"type": "string"}, "vip": {"type": "boolean"}},
                 "required": ["name", "email"]},
    "status": {"enum": ["pending", "shipped", "delivered"]},
    "items": {"type": "array", "items": {"type": "object", "properties": {
        "sku": {"type": "string"}, "qty": {"type": "integer", "minimum": 1},
        "price": {"type": "number"}, "note": {"type": "string"}},
        "required": ["sku", "qty", "price"]}},
    "placed": {"type": "string", "format": "date-time"}},
  "required": ["id", "customer", "status", "items", "placed"]}}})";

// A document valid under kSchema with the free text a model writes into strings.
constexpr const char* kDocument =
    R"({"customer": {"email": "maria.gonzalez@example.com", "name": "María González", "vip": true}, "id": "3f2b8c1e-9d4a-4e7b-a1c2-5d6e7f8a9b0c", "items": [{"note": "Please wrap this one as a gift, it is for my brother's birthday next week.", "price": 24.99, "qty": 2, "sku": "BK-2291"}, {"price": 7.5, "qty": 10, "sku": "PEN-BLUE-10"}, {"note": "The large size, not the medium one I ordered last time by mistake.", "price": 59.0, "qty": 1, "sku": "TS-L-0042"}], "placed": "2024-05-17T14:03:22Z", "status": "shipped"})";

struct Figures {
  double median_us, p90_us, max_us;
};

Figures figures(std::vector<double> us) {
  std::sort(us.begin(), us.end());
  return {percentile_of_sorted(us, 50), percentile_of_sorted(us, 90), us.back()};
}

void print(const char* what, const Figures& f, size_t n) {
  fmt::print("{:<44} {:>8.1f} {:>8.1f} {:>9.1f}   ({} tokens)\n", what, f.median_us, f.p90_us,
             f.max_us, n);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("structured-output mask cost per token");
  std::string model = "../shared/models/llama2-tiny-random/llama-2-tiny-random.gguf";
  int repeat = 5;
  app.add_option("--model", model, "GGUF whose vocabulary to use")->capture_default_str();
  app.add_option("--repeat", repeat, "warm requests")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  const auto tokenizer = Tokenizer::create(tokenizer_from_gguf(GgufFile::open(model)));
  std::vector<int32_t> eog;
  for (int32_t id = 0; id < tokenizer->vocab_size(); ++id) {
    if (tokenizer->is_end_of_generation(id)) eog.push_back(id);
  }
  TimePoint t0 = Clock::now();
  const grammar::TokenTrie trie = grammar::make_token_trie(*tokenizer, eog);
  const double build_ms = seconds_between(t0, Clock::now()) * 1e3;
  const auto constraint =
      api::read_constraint({{"response_format", nlohmann::json::parse(kSchema)}});
  // Tokens as a sampler could pick them: the longest vocabulary piece at each position
  // (the tokenizer's own segmentation would start with SentencePiece's space).
  std::vector<int32_t> tokens;
  for (std::string_view rest = kDocument; !rest.empty();) {
    int32_t best = -1;
    for (int32_t id = 0; id < trie.vocab_size(); ++id) {
      const std::string& p = trie.piece(id);
      if (!p.empty() && rest.starts_with(p) && (best < 0 || p.size() > trie.piece(best).size())) {
        best = id;
      }
    }
    tokens.push_back(best);
    rest.remove_prefix(trie.piece(best).size());
  }
  fmt::print("vocabulary: {} tokens, trie of {} nodes built in {:.1f} ms; document: {} tokens\n",
             trie.vocab_size(), trie.num_nodes(), build_ms, tokens.size());

  std::vector<float> logits(static_cast<size_t>(trie.vocab_size()));
  // One request: mask + apply, then accept, for each token; returns per-token microseconds.
  auto run = [&](const std::shared_ptr<const grammar::Constraint>& c) {
    grammar::GrammarState state(c, trie);
    std::vector<double> us;
    for (const int32_t t : tokens) {
      std::fill(logits.begin(), logits.end(), 0.0f);
      const TimePoint start = Clock::now();
      const size_t allowed = state.apply(logits);
      us.push_back(seconds_between(start, Clock::now()) * 1e6);
      if (allowed == 0 || !state.accept(t)) {
        fmt::print(stderr, "the document does not follow the schema at token {}\n", t);
        std::exit(1);
      }
    }
    if (!state.complete()) {
      fmt::print(stderr, "the document is incomplete\n");
      std::exit(1);
    }
    return us;
  };
  fmt::print("\n{:<44} {:>8} {:>8} {:>9}\n", "per-token mask time (us)", "median", "p90", "max");
  print("first request (cold cache)", figures(run(constraint)), tokens.size());
  std::vector<double> warm;
  for (int i = 0; i < repeat; ++i) {
    const std::vector<double> us = run(constraint);
    warm.insert(warm.end(), us.begin(), us.end());
  }
  print("later requests, same schema (shared cache)", figures(warm), warm.size());
  // Uncached: a fresh constraint object per token step's state = a trie walk every time.
  {
    // A fresh matcher per token: no DFA transitions known yet either.
    std::string prefix;
    grammar::TokenMask mask;
    std::vector<double> us;
    uint64_t most_work = 0;  // matcher steps (the per-token limit's unit)
    for (const int32_t t : tokens) {
      grammar::Matcher matcher(constraint->grammar);
      int32_t id = matcher.initial_id();
      for (const char c : prefix) id = matcher.step(id, static_cast<uint8_t>(c));
      matcher.reset_work();
      const TimePoint start = Clock::now();
      grammar::compute_token_mask(matcher, id, trie, mask);
      us.push_back(seconds_between(start, Clock::now()) * 1e6);
      most_work = std::max(most_work, matcher.work());
      prefix += trie.piece(t);
    }
    print("no mask cache, fresh DFA (worst case)", figures(us), us.size());
    fmt::print("{:<44} {:>8} (the per-token limit: {})\n", "  most matcher steps for one token",
               most_work, grammar::default_work_per_token(trie));
  }
  {
    // One request's matcher: DFA transitions are reused, masks are not.
    grammar::Matcher matcher(constraint->grammar);
    int32_t id = matcher.initial_id();
    grammar::TokenMask mask;
    std::vector<double> us;
    for (const int32_t t : tokens) {
      const TimePoint start = Clock::now();
      grammar::compute_token_mask(matcher, id, trie, mask);
      us.push_back(seconds_between(start, Clock::now()) * 1e6);
      for (const char c : trie.piece(t)) id = matcher.step(id, static_cast<uint8_t>(c));
    }
    print("no mask cache, DFA of the request", figures(us), us.size());
  }
  return 0;
}
