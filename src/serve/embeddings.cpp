#include "serve/embeddings.h"

#include <algorithm>
#include <cmath>

#include "api/api_error.h"
#include "base/error.h"
#include "model/contiguous_kv_store.h"

namespace rapide::serve {

using nlohmann::json;

namespace {

// Tokens one forward pass takes at most, over every sequence in it.
constexpr int kMaxBatchTokens = 2048;

std::vector<int32_t> token_list(const json& ids, const Tokenizer& tokenizer) {
  std::vector<int32_t> out;
  for (const json& id : ids) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 ||
        id.get<int64_t>() >= tokenizer.vocab_size()) {
      throw api::ApiError(
          400, fmt::format("'input' token ids must be in 0..{}", tokenizer.vocab_size() - 1),
          "input", "invalid_value");
    }
    out.push_back(id.get<int32_t>());
  }
  return out;
}

}  // namespace

Pooling parse_pooling(const std::string& name) {
  if (name == "last") return Pooling::kLast;
  if (name == "mean") return Pooling::kMean;
  fail(ErrorCode::kInvalidArgument, "--pooling must be last or mean, got '{}'", name);
}

std::vector<std::vector<int32_t>> parse_embedding_inputs(const json& body,
                                                         const Tokenizer& tokenizer,
                                                         int max_context) {
  if (!body.is_object() || !body.contains("input")) {
    throw api::ApiError(400, "'input' is required: a string, a list of strings or token ids",
                        "input", "missing_field");
  }
  if (body.contains("encoding_format") && body["encoding_format"] != "float") {
    throw api::ApiError(400, "only encoding_format \"float\" is supported", "encoding_format",
                        "invalid_value");
  }
  const json& input = body["input"];
  std::vector<std::vector<int32_t>> out;
  auto text = [&](const json& s) {
    try {
      out.push_back(tokenizer.encode(s.get<std::string>(), /*add_bos=*/true));
    } catch (const Error& e) {
      throw api::api_error_from(e, "input");
    }
  };
  if (input.is_string()) {
    text(input);
  } else if (input.is_array() && !input.empty() && input[0].is_number_integer()) {
    out.push_back(token_list(input, tokenizer));
  } else if (input.is_array() && !input.empty()) {
    for (const json& item : input) {
      if (item.is_string()) {
        text(item);
      } else if (item.is_array()) {
        out.push_back(token_list(item, tokenizer));
      } else {
        throw api::ApiError(400, "'input' items must be strings or lists of token ids", "input",
                            "invalid_type");
      }
    }
  } else {
    throw api::ApiError(400, "'input' must be a non-empty string or list", "input", "invalid_type");
  }
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i].empty()) {
      throw api::ApiError(400, fmt::format("input {} has no tokens", i), "input", "invalid_value");
    }
    if (static_cast<int>(out[i].size()) > max_context) {
      throw api::ApiError(400,
                          fmt::format("input {} has {} tokens; the model's context holds {}", i,
                                      out[i].size(), max_context),
                          "input", "context_length_exceeded");
    }
  }
  return out;
}

json embeddings_response(const std::vector<std::vector<float>>& vectors,
                         const std::vector<std::vector<int32_t>>& inputs,
                         const std::string& model_id) {
  json data = json::array();
  size_t tokens = 0;
  for (size_t i = 0; i < vectors.size(); ++i) {
    data.push_back({{"object", "embedding"}, {"index", i}, {"embedding", vectors[i]}});
    tokens += inputs[i].size();
  }
  return {{"object", "list"},
          {"data", std::move(data)},
          {"model", model_id},
          {"usage", {{"prompt_tokens", tokens}, {"total_tokens", tokens}}}};
}

std::vector<float> pool_hidden_states(std::span<const float> rows, int dim, Pooling pooling) {
  const size_t n = rows.size() / static_cast<size_t>(dim);
  std::vector<double> sum(static_cast<size_t>(dim), 0.0);
  const size_t first = pooling == Pooling::kLast ? n - 1 : 0;
  for (size_t r = first; r < n; ++r) {
    for (int d = 0; d < dim; ++d) sum[d] += rows[r * dim + d];
  }
  double norm = 0.0;
  for (const double v : sum) norm += v * v;
  norm = std::sqrt(norm);
  std::vector<float> out(static_cast<size_t>(dim));
  // Mean pooling's 1/n cancels in the normalisation.
  for (int d = 0; d < dim; ++d) out[d] = norm > 0 ? static_cast<float>(sum[d] / norm) : 0.0f;
  return out;
}

Embedder::Embedder(std::shared_ptr<const ModelFile> file, Pooling pooling, int threads)
    : file_(std::move(file)), pooling_(pooling), threads_(threads), worker_([this] { work(); }) {}

Embedder::~Embedder() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  ready_.notify_all();
  worker_.join();
}

void Embedder::submit(std::vector<std::vector<int32_t>> inputs, Result done) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    jobs_.push_back({std::move(inputs), std::move(done)});
  }
  ready_.notify_one();
}

void Embedder::work() {
  for (;;) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      ready_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
      if (jobs_.empty()) return;  // stopping, nothing left
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    try {
      job.done(embed(job.inputs), {});
    } catch (const std::exception& e) {
      job.done({}, e.what());
    }
  }
}

std::vector<std::vector<float>> Embedder::embed(const std::vector<std::vector<int32_t>>& inputs) {
  if (!model_) {
    model_ = std::make_unique<Model>(file_);
    pool_ = std::make_unique<ThreadPool>(threads_);
  }
  const ModelConfig& c = model_->config();
  std::vector<std::vector<float>> out(inputs.size());
  // Groups of consecutive inputs whose tokens fit one pass run together, one KV sequence
  // each; a longer input runs alone, in passes of kMaxBatchTokens.
  for (size_t begin = 0; begin < inputs.size();) {
    size_t end = begin + 1;
    size_t tokens = inputs[begin].size();
    while (end < inputs.size() && tokens + inputs[end].size() <= kMaxBatchTokens) {
      tokens += inputs[end++].size();
    }
    size_t longest = 0;
    for (size_t i = begin; i < end; ++i) longest = std::max(longest, inputs[i].size());
    ContiguousKvStore kv(c, static_cast<int>(end - begin), static_cast<int>(longest));
    std::vector<std::vector<float>> rows(end - begin);
    for (size_t offset = 0; offset < longest; offset += kMaxBatchTokens) {
      Batch batch;
      for (size_t i = begin; i < end; ++i) {
        const size_t stop = std::min(inputs[i].size(), offset + kMaxBatchTokens);
        for (size_t p = offset; p < stop; ++p) {
          batch.add(inputs[i][p], static_cast<int32_t>(i - begin), static_cast<int32_t>(p), false);
        }
      }
      const std::span<const float> hidden = model_->forward_hidden(batch, kv, *pool_);
      for (int t = 0; t < batch.size(); ++t) {
        std::vector<float>& r = rows[batch.seq_ids[t]];
        r.insert(r.end(), hidden.begin() + static_cast<size_t>(t) * c.dim,
                 hidden.begin() + static_cast<size_t>(t + 1) * c.dim);
      }
    }
    for (size_t i = begin; i < end; ++i)
      out[i] = pool_hidden_states(rows[i - begin], c.dim, pooling_);
    begin = end;
  }
  return out;
}

}  // namespace rapide::serve
