// The traffic shapes that decide which optimization fits, as lists of conversations.
//
// Every workload is a list of conversations; single-request workloads have one turn each.
// A multi-turn conversation sends turn k+1 only after turn k finished, with the real answer
// appended to the history, so a prefix cache sees exactly what a chat front end would send.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "loadgen/length_dist.h"
#include "loadgen/text_gen.h"

namespace rapide::loadgen {

struct ChatMessage {
  std::string role;  // system | user | assistant
  std::string content;
};

struct Turn {
  std::string user;
  int output_tokens = 0;  // the length the request asks for (max_tokens, and forced)
};

struct Conversation {
  std::vector<ChatMessage> preamble;  // system prompt and any given history
  std::vector<Turn> turns;
};

enum class WorkloadKind { kRandom, kSharedPrefix, kMultiTurn, kVariableOutput, kRag, kJsonl };

WorkloadKind parse_workload_kind(const std::string& name);
const char* workload_kind_name(WorkloadKind kind);

struct WorkloadOptions {
  WorkloadKind kind = WorkloadKind::kRandom;
  size_t num_requests = 100;  // total requests (turns) to send
  // Unset = the workload's own default (see docs/bench.md).
  std::optional<LengthDist> input_len;  // the varying user part of each request
  std::optional<LengthDist> output_len;
  int prefix_len = 1000;   // shared-prefix: system prompt tokens
  int num_prefixes = 1;    // shared-prefix: distinct system prompts, used round robin
  int context_len = 3000;  // rag: retrieved context tokens
  int num_docs = 0;        // rag: distinct contexts to draw from (0 = one per request)
  int turns = 4;           // multi-turn: turns per conversation
  std::string dataset;     // jsonl: path
  uint64_t seed = 0;       // lengths and choices
  uint64_t text_seed = 0;  // the words themselves (vary it per run so runs share no cache)
  // The model's context (0 = unknown). The defaults the user left (unset lengths, and
  // prefix_len / context_len unless sizes_given) shrink so a request's worst case fits.
  int max_context = 0;
  bool sizes_given = false;
};

// `options` with its defaults shrunk to fit max_context (see WorkloadOptions); `note` says
// what changed ("" when nothing did).
WorkloadOptions fit_to_context(const WorkloadOptions& options, std::string& note);

// Throws Error for a bad dataset (missing file, a line without prompt or messages).
std::vector<Conversation> build_workload(const WorkloadOptions& options,
                                         const TokenCounter& counter);

// The text a completions endpoint (or the in-process engine) receives for a message list:
// a lone user message as is; otherwise "System text\n\nUser: ...\nAssistant: ...\nAssistant:".
std::string render_prompt(const std::vector<ChatMessage>& messages);

}  // namespace rapide::loadgen
