#include "serve/embeddings.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <numeric>

#include "api/api_error.h"
#include "api/openai_protocol.h"
#include "base/error.h"

namespace rapide::serve {

using nlohmann::json;

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
  const json& input = body["input"];
  // The inputs: the field itself (a string, or one list of ids) or each of its items.
  std::vector<const json*> items;
  if (input.is_string() || (input.is_array() && !input.empty() && input[0].is_number_integer())) {
    items.push_back(&input);
  } else if (input.is_array() && !input.empty()) {
    if (input.size() > kMaxEmbeddingInputs) {  // before anything is tokenized
      throw api::ApiError(400,
                          fmt::format("'input' holds {} inputs; a request may hold at most {}",
                                      input.size(), kMaxEmbeddingInputs),
                          "input", "too_many_inputs");
    }
    for (const json& item : input) items.push_back(&item);
  } else {
    throw api::ApiError(400, "'input' must be a non-empty string or list", "input", "invalid_type");
  }
  std::vector<std::vector<int32_t>> out;
  out.reserve(items.size());
  int64_t total = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    const json& item = *items[i];
    const auto too_long = [&](size_t tokens) {
      return api::ApiError(400,
                           fmt::format("input {} has {} tokens; the model's context holds {}", i,
                                       tokens, max_context),
                           "input", "context_length_exceeded");
    };
    if (item.is_string()) {
      try {
        out.push_back(tokenizer.encode(item.get<std::string>(), /*add_bos=*/true));
      } catch (const Error& e) {
        throw api::api_error_from(e, "input");
      }
    } else if (item.is_array()) {
      if (item.size() > static_cast<size_t>(max_context)) throw too_long(item.size());
      out.push_back(api::read_token_ids(item, "input", tokenizer.vocab_size()));
    } else {
      throw api::ApiError(400, "'input' items must be strings or lists of token ids", "input",
                          "invalid_type");
    }
    const size_t tokens = out.back().size();
    if (tokens == 0) {
      throw api::ApiError(400, fmt::format("input {} has no tokens", i), "input", "invalid_value");
    }
    if (tokens > static_cast<size_t>(max_context)) throw too_long(tokens);
    total += static_cast<int64_t>(tokens);
    if (total > kMaxEmbeddingTokens) {  // the rest is not tokenized
      throw api::ApiError(400,
                          fmt::format("the inputs hold more than {} tokens (inputs 0..{} hold {}); "
                                      "send them in several requests",
                                      kMaxEmbeddingTokens, i, total),
                          "input", "too_many_tokens");
    }
  }
  return out;
}

EmbeddingEncoding parse_embedding_encoding(const json& body, int dim) {
  EmbeddingEncoding encoding = EmbeddingEncoding::kFloat;
  if (!body.is_object()) return encoding;  // parse_embedding_inputs refuses it
  if (const auto it = body.find("encoding_format"); it != body.end() && !it->is_null()) {
    if (*it == "base64") {
      encoding = EmbeddingEncoding::kBase64;
    } else if (*it != "float") {
      throw api::ApiError(
          400, fmt::format("'encoding_format' must be \"float\" or \"base64\", got {}", it->dump()),
          "encoding_format", "invalid_value");
    }
  }
  if (const auto it = body.find("dimensions"); it != body.end() && !it->is_null()) {
    if (!it->is_number_integer() || it->get<int64_t>() < 1) {
      throw api::ApiError(400, "'dimensions' must be a positive integer", "dimensions",
                          "invalid_type");
    }
    // Truncating and renormalising is only an embedding for Matryoshka-trained models.
    if (it->get<int64_t>() != dim) {
      throw api::ApiError(
          400,
          fmt::format("this model does not support shortening its embeddings: its {}-wide "
                      "vectors are pooled hidden states, not trained so that a prefix is an "
                      "embedding (Matryoshka); 'dimensions' may only be {}, got {}",
                      dim, dim, it->dump()),
          "dimensions", "unsupported");
    }
  }
  return encoding;
}

std::string base64_float32(std::span<const float> values) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::vector<uint8_t> bytes(values.size() * 4);
  for (size_t i = 0; i < values.size(); ++i) {
    const uint32_t bits = std::bit_cast<uint32_t>(values[i]);
    for (int b = 0; b < 4; ++b) bytes[i * 4 + b] = static_cast<uint8_t>(bits >> (8 * b));
  }
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const size_t left = bytes.size() - i;
    const uint32_t chunk = (uint32_t{bytes[i]} << 16) |
                           (left > 1 ? uint32_t{bytes[i + 1]} << 8 : 0) |
                           (left > 2 ? uint32_t{bytes[i + 2]} : 0);
    out += kAlphabet[(chunk >> 18) & 63];
    out += kAlphabet[(chunk >> 12) & 63];
    out += left > 1 ? kAlphabet[(chunk >> 6) & 63] : '=';
    out += left > 2 ? kAlphabet[chunk & 63] : '=';
  }
  return out;
}

json embeddings_response(const std::vector<std::vector<float>>& vectors, int64_t total_tokens,
                         const std::string& model_id, EmbeddingEncoding encoding) {
  json data = json::array();
  for (size_t i = 0; i < vectors.size(); ++i) {
    json embedding = encoding == EmbeddingEncoding::kBase64 ? json(base64_float32(vectors[i]))
                                                            : json(vectors[i]);
    data.push_back({{"object", "embedding"}, {"index", i}, {"embedding", std::move(embedding)}});
  }
  return {{"object", "list"},
          {"data", std::move(data)},
          {"model", model_id},
          {"usage", {{"prompt_tokens", total_tokens}, {"total_tokens", total_tokens}}}};
}

PooledVector::PooledVector(int dim, Pooling pooling, size_t length)
    : pooling_(pooling), length_(length), sum_(static_cast<size_t>(dim), 0.0) {}

void PooledVector::add(std::span<const float> row, size_t position) {
  if (pooling_ == Pooling::kLast && position + 1 != length_) return;
  for (size_t d = 0; d < sum_.size(); ++d) sum_[d] += row[d];
}

std::vector<float> PooledVector::finish() const {
  double norm = 0.0;
  for (const double v : sum_) norm += v * v;
  norm = std::sqrt(norm);
  std::vector<float> out(sum_.size());
  // Mean pooling's 1/n cancels in the normalisation.
  for (size_t d = 0; d < sum_.size(); ++d) {
    out[d] = norm > 0 ? static_cast<float>(sum_[d] / norm) : 0.0f;
  }
  return out;
}

std::vector<float> pool_hidden_states(std::span<const float> rows, int dim, Pooling pooling) {
  const size_t n = rows.size() / static_cast<size_t>(dim);
  PooledVector pooled(dim, pooling, n);
  for (size_t r = 0; r < n; ++r) pooled.add(rows.subspan(r * dim, static_cast<size_t>(dim)), r);
  return pooled.finish();
}

std::vector<EmbeddingGroup> plan_embedding_groups(const std::vector<std::vector<int32_t>>& inputs,
                                                  int max_pass_tokens) {
  const size_t budget = static_cast<size_t>(std::max(1, max_pass_tokens));
  std::vector<size_t> order(inputs.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return inputs[a].size() < inputs[b].size(); });
  std::vector<EmbeddingGroup> groups;
  for (size_t k = 0; k < order.size();) {
    EmbeddingGroup g;
    g.inputs.push_back(order[k]);
    g.longest = inputs[order[k++]].size();
    // Sorted: the next input is the group's longest if it joins.
    while (k < order.size() && (g.inputs.size() + 1) * inputs[order[k]].size() <= budget) {
      g.longest = inputs[order[k]].size();
      g.inputs.push_back(order[k++]);
    }
    groups.push_back(std::move(g));
  }
  return groups;
}

EmbeddingJob::EmbeddingJob(std::shared_ptr<Model> model, Pooling pooling, int max_pass_tokens,
                           std::vector<std::vector<int32_t>> inputs,
                           std::shared_ptr<const CancelFlag> cancelled, Result done)
    : model_(std::move(model)),
      pooling_(pooling),
      max_pass_tokens_(std::max(1, max_pass_tokens)),
      inputs_(std::move(inputs)),
      cancelled_(std::move(cancelled)),
      done_(std::move(done)),
      groups_(plan_embedding_groups(inputs_, max_pass_tokens_)),
      vectors_(inputs_.size()) {}

bool EmbeddingJob::run_slice(ThreadPool& pool) {
  // Nobody waits for the answer: stop here; the engine destroys the job and its memory.
  if (cancelled_ && cancelled_->load(std::memory_order_relaxed)) return true;
  try {
    if (!run_pass(pool)) return false;
  } catch (...) {
    done_({}, std::current_exception());
    return true;
  }
  done_(std::move(vectors_), nullptr);
  return true;
}

void EmbeddingJob::abandon(const std::string& reason) {
  if (cancelled_ && cancelled_->load(std::memory_order_relaxed)) return;
  done_({}, std::make_exception_ptr(Error(ErrorCode::kUnavailable, reason)));
}

bool EmbeddingJob::run_pass(ThreadPool& pool) {
  if (group_ >= groups_.size()) return true;
  const ModelConfig& c = model_->config();
  const EmbeddingGroup& g = groups_[group_];
  if (!kv_) {  // the group's first pass
    kv_ = std::make_unique<ContiguousKvStore>(c, static_cast<int>(g.inputs.size()),
                                              static_cast<int>(g.longest));
    pooled_.clear();
    for (const size_t i : g.inputs) pooled_.emplace_back(c.dim, pooling_, inputs_[i].size());
  }
  // A group of several inputs fits one pass; a longer input alone takes several.
  const size_t end = offset_ + static_cast<size_t>(max_pass_tokens_);
  Batch batch;
  for (size_t s = 0; s < g.inputs.size(); ++s) {
    const std::vector<int32_t>& tokens = inputs_[g.inputs[s]];
    for (size_t p = offset_; p < std::min(tokens.size(), end); ++p) {
      batch.add(tokens[p], static_cast<int32_t>(s), static_cast<int32_t>(p), false);
    }
  }
  const std::span<const float> hidden = model_->forward_hidden(batch, *kv_, pool);
  ++passes_;
  const size_t dim = static_cast<size_t>(c.dim);
  for (int t = 0; t < batch.size(); ++t) {
    pooled_[static_cast<size_t>(batch.seq_ids[t])].add(
        hidden.subspan(static_cast<size_t>(t) * dim, dim), static_cast<size_t>(batch.positions[t]));
  }
  offset_ = end;
  if (offset_ < g.longest) return false;
  for (size_t s = 0; s < g.inputs.size(); ++s) vectors_[g.inputs[s]] = pooled_[s].finish();
  kv_.reset();
  pooled_.clear();
  offset_ = 0;
  return ++group_ >= groups_.size();
}

Embedder::Embedder(std::shared_ptr<const ModelFile> file, Pooling pooling)
    : file_(std::move(file)), pooling_(pooling) {}

void Embedder::prepare() {
  std::call_once(model_once_, [this] { model_ = std::make_shared<Model>(file_); });
}

std::unique_ptr<EmbeddingJob> Embedder::job(std::vector<std::vector<int32_t>> inputs,
                                            int max_pass_tokens,
                                            std::shared_ptr<const CancelFlag> cancelled,
                                            EmbeddingJob::Result done) {
  prepare();
  return std::make_unique<EmbeddingJob>(model_, pooling_, max_pass_tokens, std::move(inputs),
                                        std::move(cancelled), std::move(done));
}

std::vector<std::vector<float>> Embedder::embed(const std::vector<std::vector<int32_t>>& inputs,
                                                ThreadPool& pool, int max_pass_tokens) {
  std::vector<std::vector<float>> out;
  std::exception_ptr failure;
  auto j = job(inputs, max_pass_tokens, nullptr,
               [&](std::vector<std::vector<float>> vectors, std::exception_ptr error) {
                 out = std::move(vectors);
                 failure = error;
               });
  while (!j->run_slice(pool)) {
  }
  if (failure) std::rethrow_exception(failure);
  return out;
}

}  // namespace rapide::serve
