// POST /v1/embeddings (OpenAI's shape): each input's hidden states from the model's prefill
// pass (Model::forward_hidden, the output head skipped), pooled over the input's tokens
// (`--pooling last`: the last token's, the one a causal model has seen everything with;
// `mean`: their average) and L2-normalised.
//
//   {"input": "text" | ["text", ...] | [ids] | [[ids], ...], "model", "encoding_format",
//    "dimensions"}
//   -> {"object": "list", "data": [{"object": "embedding", "index", "embedding": [...]}],
//       "model", "usage": {"prompt_tokens", "total_tokens"}}
//
// encoding_format "float" (the default) writes each embedding as a JSON list of numbers;
// "base64" as the base64 text of its little-endian float32 bytes, which is what OpenAI sends
// and what its official clients ask for by default and decode. `dimensions` is OpenAI's
// shortening of an embedding, which it allows only for models trained so that a prefix of
// the vector is itself an embedding (Matryoshka, text-embedding-3); the pooled hidden states
// of a generative model are not, so only the model's own width is accepted and any other
// value is a 400 that says why.
//
// What one request may ask for, as OpenAI's limits: at most kMaxEmbeddingInputs inputs and
// kMaxEmbeddingTokens tokens in all, each input at most the context; beyond them a 400
// (too_many_inputs, too_many_tokens, context_length_exceeded), found while parsing on the
// server's request workers, before any forward pass.
//
// The forward passes run on the engine thread between its steps (an EmbeddingJob is a
// BackgroundTask, engine/background_task.h), each of at most --max-batch-tokens tokens, so a
// large request interleaves with generation instead of competing with it for the cores. Each
// pass first checks the request's cancel flag (set when the client disconnects): a job
// nobody waits for stops at its next pass and frees its memory.
//
// The Embedder has its own Model over the same mapped file (the engine's serves generation,
// and a tensor-parallel engine's replays its passes on other ranks), built by prepare() on
// the first request: a server that never embeds pays nothing, one that does pays the model's
// prepared weights a second time where a kernel repacks them (quantized types).
#pragma once

#include <atomic>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/background_task.h"
#include "formats/model_file.h"
#include "model/contiguous_kv_store.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace rapide::serve {

// OpenAI's caps on one request: inputs in the list, and tokens over all of them.
inline constexpr size_t kMaxEmbeddingInputs = 2048;
inline constexpr int64_t kMaxEmbeddingTokens = 300000;

enum class Pooling { kLast, kMean };
// "last" | "mean"; throws Error(kInvalidArgument) otherwise.
Pooling parse_pooling(const std::string& name);

// The request's inputs as token ids (text tokenized with BOS, as completions prompts are).
// Throws ApiError(400): a malformed or empty input; more than kMaxEmbeddingInputs inputs
// (too_many_inputs, before anything is tokenized); more than kMaxEmbeddingTokens tokens in
// all (too_many_tokens, found as soon as the total passes it); an input longer than
// max_context (context_length_exceeded).
std::vector<std::vector<int32_t>> parse_embedding_inputs(const nlohmann::json& body,
                                                         const Tokenizer& tokenizer,
                                                         int max_context);

enum class EmbeddingEncoding { kFloat, kBase64 };

// The request's encoding_format and dimensions, checked against the model's width `dim`.
// Throws ApiError(400) naming the field.
EmbeddingEncoding parse_embedding_encoding(const nlohmann::json& body, int dim);

// One embedding as base64 of its float32 values in little-endian byte order.
std::string base64_float32(std::span<const float> values);

nlohmann::json embeddings_response(const std::vector<std::vector<float>>& vectors,
                                   int64_t total_tokens, const std::string& model_id,
                                   EmbeddingEncoding encoding = EmbeddingEncoding::kFloat);

// One input's hidden states folded into its pooled vector as the passes produce them, so a
// request holds a vector per input, not a row per token.
class PooledVector {
 public:
  PooledVector(int dim, Pooling pooling, size_t length);
  // The hidden state of the token at `position` (0 .. length - 1).
  void add(std::span<const float> row, size_t position);
  std::vector<float> finish() const;  // L2-normalised

 private:
  Pooling pooling_;
  size_t length_;
  std::vector<double> sum_;
};

// Pools rows x dim hidden states of one input and L2-normalises the result.
std::vector<float> pool_hidden_states(std::span<const float> rows, int dim, Pooling pooling);

// Inputs that share forward passes: sorted by length, consecutive ones while their count
// times the longest fits max_pass_tokens (it bounds both the pass and the KV the group
// reserves, padding included); an input longer than that runs alone, in passes of
// max_pass_tokens tokens.
struct EmbeddingGroup {
  std::vector<size_t> inputs;  // indices into the request's inputs
  size_t longest = 0;          // tokens
};
std::vector<EmbeddingGroup> plan_embedding_groups(const std::vector<std::vector<int32_t>>& inputs,
                                                  int max_pass_tokens);

using CancelFlag = std::atomic<bool>;

// One request's forward passes, a pass per slice.
class EmbeddingJob final : public BackgroundTask {
 public:
  // One vector per input, or the failure (null when it succeeded).
  using Result =
      std::function<void(std::vector<std::vector<float>> vectors, std::exception_ptr error)>;

  // `done` runs once, on the engine thread: with the vectors, with the failure of a pass,
  // or with Error(kUnavailable) when the engine stops first. Never when `cancelled` was set
  // first: the job then ends at its next slice without a word.
  EmbeddingJob(std::shared_ptr<Model> model, Pooling pooling, int max_pass_tokens,
               std::vector<std::vector<int32_t>> inputs,
               std::shared_ptr<const CancelFlag> cancelled, Result done);

  bool run_slice(ThreadPool& pool) override;
  void abandon(const std::string& reason) override;

  int passes() const { return passes_; }  // forward passes run so far

 private:
  // Runs the next pass; true when every input is pooled.
  bool run_pass(ThreadPool& pool);

  std::shared_ptr<Model> model_;
  Pooling pooling_;
  int max_pass_tokens_;
  std::vector<std::vector<int32_t>> inputs_;
  std::shared_ptr<const CancelFlag> cancelled_;
  Result done_;
  std::vector<EmbeddingGroup> groups_;
  size_t group_ = 0;                       // the group in progress
  size_t offset_ = 0;                      // its next position
  std::unique_ptr<ContiguousKvStore> kv_;  // the group in progress's
  std::vector<PooledVector> pooled_;       // its inputs', in group order
  std::vector<std::vector<float>> vectors_;
  int passes_ = 0;
};

class Embedder {
 public:
  Embedder(std::shared_ptr<const ModelFile> file, Pooling pooling);
  Embedder(const Embedder&) = delete;
  Embedder& operator=(const Embedder&) = delete;

  // Builds the model on the first call (thread-safe). Seconds for a large quantized model:
  // call it on a request worker, not on the engine thread.
  void prepare();
  // A job for `inputs` (prepare()s first); see EmbeddingJob.
  std::unique_ptr<EmbeddingJob> job(std::vector<std::vector<int32_t>> inputs, int max_pass_tokens,
                                    std::shared_ptr<const CancelFlag> cancelled,
                                    EmbeddingJob::Result done);

  // Every pass at once on the caller's thread (tests, tools).
  std::vector<std::vector<float>> embed(const std::vector<std::vector<int32_t>>& inputs,
                                        ThreadPool& pool, int max_pass_tokens = 2048);

 private:
  std::shared_ptr<const ModelFile> file_;
  Pooling pooling_;
  std::once_flag model_once_;
  std::shared_ptr<Model> model_;  // built by prepare(); jobs share it
};

}  // namespace rapide::serve
