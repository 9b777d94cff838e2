// POST /v1/embeddings (OpenAI's shape): each input's hidden states from the model's prefill
// pass (Model::forward_hidden, the output head skipped), pooled over the input's tokens
// (`--pooling last`: the last token's, the one a causal model has seen everything with;
// `mean`: their average) and L2-normalised.
//
//   {"input": "text" | ["text", ...] | [ids] | [[ids], ...], "model", "encoding_format"}
//   -> {"object": "list", "data": [{"object": "embedding", "index", "embedding": [...]}],
//       "model", "usage": {"prompt_tokens", "total_tokens"}}
//
// The Embedder has its own Model over the same mapped file (and its own worker thread), so
// an embedding never waits for or races the engine's steps. It is built on the first
// request: a server that never embeds pays nothing, one that does pays the model's
// prepared weights a second time where a kernel repacks them (quantized types).
// Inputs go through in batches: several sequences share each forward pass.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/thread_pool.h"
#include "formats/model_file.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace rapide::serve {

enum class Pooling { kLast, kMean };
// "last" | "mean"; throws Error(kInvalidArgument) otherwise.
Pooling parse_pooling(const std::string& name);

// The request's inputs as token ids (text tokenized with BOS, as completions prompts are).
// Throws ApiError(400) for a malformed or empty input, or one longer than max_context.
std::vector<std::vector<int32_t>> parse_embedding_inputs(const nlohmann::json& body,
                                                         const Tokenizer& tokenizer,
                                                         int max_context);

nlohmann::json embeddings_response(const std::vector<std::vector<float>>& vectors,
                                   const std::vector<std::vector<int32_t>>& inputs,
                                   const std::string& model_id);

// Pools rows x dim hidden states of one input and L2-normalises the result.
std::vector<float> pool_hidden_states(std::span<const float> rows, int dim, Pooling pooling);

class Embedder {
 public:
  using Result = std::function<void(std::vector<std::vector<float>> vectors, std::string error)>;

  Embedder(std::shared_ptr<const ModelFile> file, Pooling pooling, int threads);
  ~Embedder();  // finishes the queued jobs, then joins the worker
  Embedder(const Embedder&) = delete;
  Embedder& operator=(const Embedder&) = delete;

  // Queues the inputs; `done` runs on the worker thread with one vector per input, or an
  // error message.
  void submit(std::vector<std::vector<int32_t>> inputs, Result done);

  // The work itself, on the caller's thread (the worker's, and tests').
  std::vector<std::vector<float>> embed(const std::vector<std::vector<int32_t>>& inputs);

 private:
  struct Job {
    std::vector<std::vector<int32_t>> inputs;
    Result done;
  };
  void work();

  std::shared_ptr<const ModelFile> file_;
  Pooling pooling_;
  int threads_;
  std::unique_ptr<Model> model_;  // built by the first embed()
  std::unique_ptr<ThreadPool> pool_;

  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<Job> jobs_;
  bool stopping_ = false;
  std::thread worker_;
};

}  // namespace rapide::serve
