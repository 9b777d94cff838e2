// One engine step as plain data: what the scheduler planned (StepPlan) and what running the
// plan produced (StepResult), after vLLM v1's SchedulerOutput / ModelRunnerOutput.
//
// Both are values: ids, token ids, positions and block numbers, never pointers into the
// scheduler's state. A step can be logged, replayed against a fresh KV store, sent to other
// ranks, or kept for the advisor, and the scheduler can be tested on fake results without a
// model or a thread.
//
// The step's contract, in order (Engine::step):
//   1. Scheduler::schedule() -> StepPlan. KV blocks are reserved for every planned token;
//      nothing else about a sequence changes yet. The moves of block bytes that scheduling
//      made (copy-on-write, prefix hits copied or restored from the offload tier, evictions
//      into it) are the plan's kv_ops: memory other than the scheduler's store repeats them
//      before running the plan (tensor-parallel followers, a replay).
//   2. ModelRunner::run(plan) -> logits. Rows follow the plan's order: each sequence
//      contributes its last `logits_rows` fed positions (tokens, then drafts).
//   3. OutputProcessor::process(plan, logits) -> StepResult: sampled tokens and finish
//      reasons per sequence that had logits (padding rows excluded).
//   4. Scheduler::update(plan, result): the only place tokens are appended, positions
//      advanced, and sequences finished or freed.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/request.h"
#include "model/kv_ops.h"
#include "sampling/finish_reason.h"
#include "sampling/truncation.h"

namespace rapide {

// One sequence's share of a step.
struct ScheduledSequence {
  RequestId request_id = 0;
  int32_t kv_id = 0;            // the KV store's sequence id
  int32_t start_position = 0;   // position of tokens[0]; positions before it are in the KV
  std::vector<int32_t> tokens;  // fed this step: a prefill chunk, or one decode token
  // Proposed continuation fed after `tokens` to be verified in the same pass (speculative
  // decoding); its positions follow tokens'. Empty when nothing is proposed.
  std::vector<int32_t> draft_tokens;
  // Per draft token, the distribution a sampling proposer drew it from (verification's q);
  // empty when the proposer is deterministic.
  std::vector<std::vector<Candidate>> draft_distributions;
  // How many trailing fed positions need logits: 0 for a prefill chunk short of the prompt's
  // end, 1 for a decode or a prompt's last chunk, 1 + drafts when drafts are verified.
  int32_t logits_rows = 0;
  // The sequence's KV blocks once this step's positions are reserved (a copy): what a
  // store other than the scheduler's attends through (replay, kv/replica_kv_store.h).
  std::vector<int32_t> block_table;
  bool is_decode = false;  // one token of a sequence that is generating (not prompt work)
  int32_t adapter = -1;    // the LoRA adapter its positions run with (Request::adapter)
  // Static batching: a finished request's row, computed like a dense batch's but never
  // sampled; its "token" repeats the last one.
  bool padding = false;

  int32_t fed() const { return static_cast<int32_t>(tokens.size() + draft_tokens.size()); }
};

struct StepPlan {
  uint64_t step = 0;  // 1, 2, ... per engine
  std::vector<ScheduledSequence> sequences;
  std::vector<RequestId> preempted;  // sent back to the queue while this step was planned
  // KV memory ops made since the previous plan, in order; all run before the forward pass.
  std::vector<KvOp> kv_ops;
  int prefill_tokens = 0;
  int decode_tokens = 0;

  bool empty() const { return sequences.empty(); }
  int logits_rows() const {
    int n = 0;
    for (const ScheduledSequence& s : sequences) n += s.logits_rows;
    return n;
  }
};

// One sampled token with what the request asked to know about it.
struct SampledToken {
  int32_t token = -1;
  float logprob = 0.0f;  // the model's raw logprob (when logprobs were asked for)
  std::vector<TokenLogprob> top_logprobs;
};

// What a step produced for one sequence that had logits.
struct SequenceOutput {
  RequestId request_id = 0;
  // Tokens to append, in order: one today, several once drafts are accepted. Empty when the
  // sequence failed before sampling.
  std::vector<SampledToken> tokens;
  // Set when the last of `tokens` (or the failure) ends the request.
  std::optional<FinishReason> finish;
  std::string error;                            // with FinishReason::kError
  ErrorCode error_code = ErrorCode::kInternal;  // with kError (FinishedRequest::error_code)
};

struct StepResult {
  uint64_t step = 0;
  std::vector<SequenceOutput> outputs;  // in plan order
};

// A request that left the running set: everything its final event reports.
struct FinishedRequest {
  RequestId request_id = 0;
  FinishReason reason = FinishReason::kLength;
  std::string error;
  int32_t prompt_tokens = 0;
  int32_t completion_tokens = 0;
  int32_t cached_prompt_tokens = 0;
  int32_t preemptions = 0;
  // The output's repetitiveness for prompt lookup (count_ngram_lookup_hits, engine/speculation.h).
  int32_t lookup_tokens = 0, lookup_hits = 0;
  RequestTimings timings;
  ErrorCode error_code = ErrorCode::kInternal;  // with kError (TokenEvent::error_code)
  KvTransferReport kv_transfer;
};

}  // namespace rapide
