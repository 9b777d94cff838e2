#include "loadgen/workload.h"

#include <nlohmann/json.hpp>

#include <fstream>

#include "base/error.h"

namespace rapide::loadgen {

namespace {

struct KindName {
  WorkloadKind kind;
  const char* name;
};
constexpr KindName kKinds[] = {
    {WorkloadKind::kRandom, "random"},
    {WorkloadKind::kSharedPrefix, "shared-prefix"},
    {WorkloadKind::kMultiTurn, "multi-turn"},
    {WorkloadKind::kVariableOutput, "variable-output"},
    {WorkloadKind::kRag, "rag"},
    {WorkloadKind::kJsonl, "jsonl"},
};

struct Defaults {
  const char* input;
  const char* output;
};

Defaults defaults_for(WorkloadKind kind) {
  switch (kind) {
    case WorkloadKind::kRandom:
      return {"100-300", "50-150"};
    case WorkloadKind::kSharedPrefix:
      return {"20-40", "50-150"};
    case WorkloadKind::kMultiTurn:
      return {"20-60", "50-150"};
    // One-sentence answers next to code-listing answers: what makes static batching idle.
    case WorkloadKind::kVariableOutput:
      return {"50-150", "10-50@0.8+500-1000@0.2"};
    case WorkloadKind::kRag:
      return {"20-40", "50-150"};
    case WorkloadKind::kJsonl:
      return {"0", "50-150"};
  }
  return {"100-300", "50-150"};
}

std::vector<Conversation> load_jsonl(const WorkloadOptions& options, const LengthDist& output,
                                     std::mt19937_64& rng) {
  std::ifstream in(options.dataset);
  if (!in) fail(ErrorCode::kNotFound, "--dataset: cannot open '{}'", options.dataset);
  std::vector<Conversation> out;
  std::string line;
  size_t line_no = 0;
  while (std::getline(in, line) &&
         (options.num_requests == 0 || out.size() < options.num_requests)) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
      fail(ErrorCode::kInvalidArgument, "{}:{}: not a JSON object", options.dataset, line_no);
    }
    Conversation c;
    Turn turn;
    if (j.contains("prompt") && j["prompt"].is_string()) {
      turn.user = j["prompt"].get<std::string>();
    } else if (j.contains("messages") && j["messages"].is_array() && !j["messages"].empty()) {
      for (const auto& m : j["messages"]) {
        c.preamble.push_back({m.value("role", "user"), m.value("content", "")});
      }
      // The last user message is the request; what precedes it is history.
      turn.user = c.preamble.back().content;
      c.preamble.pop_back();
    } else {
      fail(ErrorCode::kInvalidArgument, "{}:{}: needs \"prompt\" or \"messages\"", options.dataset,
           line_no);
    }
    turn.output_tokens = output.sample(rng);
    for (const char* key : {"output_len", "expected_output_len", "max_tokens"}) {
      if (j.contains(key) && j[key].is_number_integer()) turn.output_tokens = j[key].get<int>();
    }
    c.turns.push_back(std::move(turn));
    out.push_back(std::move(c));
  }
  if (out.empty()) fail(ErrorCode::kInvalidArgument, "{}: no prompts", options.dataset);
  return out;
}

}  // namespace

WorkloadKind parse_workload_kind(const std::string& name) {
  for (const KindName& k : kKinds) {
    if (name == k.name) return k.kind;
  }
  fail(ErrorCode::kInvalidArgument,
       "unknown workload '{}' (random, shared-prefix, multi-turn, variable-output, rag, jsonl)",
       name);
}

const char* workload_kind_name(WorkloadKind kind) {
  for (const KindName& k : kKinds) {
    if (kind == k.kind) return k.name;
  }
  return "?";
}

WorkloadOptions fit_to_context(const WorkloadOptions& given, std::string& note) {
  note.clear();
  WorkloadOptions o = given;
  if (o.max_context <= 0 || o.kind == WorkloadKind::kJsonl) return o;
  const Defaults defaults = defaults_for(o.kind);
  const LengthDist input = o.input_len.value_or(LengthDist::parse(defaults.input));
  const LengthDist output = o.output_len.value_or(LengthDist::parse(defaults.output));
  const int per_turn = input.upper() + output.upper();
  int worst = per_turn;
  if (o.kind == WorkloadKind::kSharedPrefix) worst += o.prefix_len;
  if (o.kind == WorkloadKind::kRag) worst += o.context_len;
  if (o.kind == WorkloadKind::kMultiTurn) worst = per_turn * std::max(1, o.turns);
  // A tenth spare for BOS, the chat template and tokenizers that count a little differently.
  const int budget = o.max_context * 9 / 10;
  if (worst <= budget) return o;
  const double factor = static_cast<double>(budget) / worst;
  if (!o.input_len) o.input_len = input.scaled(factor);
  if (!o.output_len) o.output_len = output.scaled(factor);
  if (!o.sizes_given) {
    o.prefix_len = std::max(1, static_cast<int>(o.prefix_len * factor));
    o.context_len = std::max(1, static_cast<int>(o.context_len * factor));
  }
  note = fmt::format(
      "the {} workload's default sizes (worst case {} tokens) exceed the model's context of {}: "
      "lengths you did not set are scaled by {:.2f}",
      workload_kind_name(o.kind), worst, o.max_context, factor);
  return o;
}

std::vector<Conversation> build_workload(const WorkloadOptions& options,
                                         const TokenCounter& counter) {
  const Defaults defaults = defaults_for(options.kind);
  const LengthDist input = options.input_len.value_or(LengthDist::parse(defaults.input));
  const LengthDist output = options.output_len.value_or(LengthDist::parse(defaults.output));
  std::mt19937_64 rng(options.seed);
  if (options.kind == WorkloadKind::kJsonl) return load_jsonl(options, output, rng);

  TextGen text(options.text_seed, counter);
  std::vector<Conversation> out;
  const size_t n = options.num_requests;
  switch (options.kind) {
    case WorkloadKind::kSharedPrefix: {
      std::vector<std::string> prefixes;
      for (int i = 0; i < std::max(1, options.num_prefixes); ++i) {
        prefixes.push_back(text.words(options.prefix_len));
      }
      for (size_t i = 0; i < n; ++i) {
        Conversation c;
        c.preamble.push_back({"system", prefixes[i % prefixes.size()]});
        c.turns.push_back({text.words(input.sample(rng)), output.sample(rng)});
        out.push_back(std::move(c));
      }
      break;
    }
    case WorkloadKind::kMultiTurn: {
      const size_t turns = static_cast<size_t>(std::max(1, options.turns));
      for (size_t sent = 0; sent < n;) {
        Conversation c;
        for (size_t t = 0; t < turns && sent < n; ++t, ++sent) {
          c.turns.push_back({text.words(input.sample(rng)), output.sample(rng)});
        }
        out.push_back(std::move(c));
      }
      break;
    }
    case WorkloadKind::kRag: {
      std::vector<std::string> docs;
      for (int i = 0; i < options.num_docs; ++i) docs.push_back(text.words(options.context_len));
      for (size_t i = 0; i < n; ++i) {
        const std::string context =
            docs.empty() ? text.words(options.context_len)
                         : docs[std::uniform_int_distribution<size_t>(0, docs.size() - 1)(rng)];
        Conversation c;
        c.preamble.push_back({"system", "Answer from this context.\n\n" + context});
        c.turns.push_back({text.words(input.sample(rng)), output.sample(rng)});
        out.push_back(std::move(c));
      }
      break;
    }
    default:  // random, variable-output: independent prompts
      for (size_t i = 0; i < n; ++i) {
        Conversation c;
        c.turns.push_back({text.words(input.sample(rng)), output.sample(rng)});
        out.push_back(std::move(c));
      }
      break;
  }
  return out;
}

std::string render_prompt(const std::vector<ChatMessage>& messages) {
  if (messages.size() == 1 && messages[0].role == "user") return messages[0].content;
  std::string out;
  for (const ChatMessage& m : messages) {
    if (m.role == "system") {
      out += m.content + "\n\n";
    } else if (m.role == "assistant") {
      out += "Assistant: " + m.content + "\n";
    } else {
      out += "User: " + m.content + "\n";
    }
  }
  return out + "Assistant:";
}

}  // namespace rapide::loadgen
