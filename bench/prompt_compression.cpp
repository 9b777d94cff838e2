// The issue-24 benchmark: what prompt compression buys in time to first token, and what it
// costs in answer fidelity, on a RAG-like workload built from real story text.
//
// Workload: passages are the paragraphs of the shared reference stories (stories-eval.txt
// and the greedy reference outputs). Each query marks a context of several passages (1-3k
// tokens of the served model) of which one holds the answer; the question is the first part
// of a sentence of that passage, and the rest of the sentence is the reference continuation.
//
// For each ratio and each scorer, every query is run `--repeats` times, the ratios
// interleaved (paired: the machine is shared and noisy), and the median taken; each run is
// measured twice: cold (the scorer's passage cache emptied first) and warm (right after:
// every passage cached, as in a RAG service whose corpus passages come back):
//   ttft      compression (scoring included) + the served model's prefill + first token
//   loglik    log-likelihood of the reference continuation after the (compressed) prompt,
//             nats per token, teacher-forced
//   agree     share of the first --greedy tokens of the greedy answer equal, position by
//             position, to the uncompressed prompt's greedy answer
// In-process (no HTTP): the served model runs on a contiguous KV cache, one sequence.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/error.h"
#include "base/logging.h"
#include "base/mapped_file.h"
#include "base/percentile.h"
#include "base/thread_pool.h"
#include "compress/context_markup.h"
#include "compress/prompt_compressor.h"
#include "formats/model_file.h"
#include "model/contiguous_kv_store.h"
#include "model/model.h"
#include "sampling/softmax_math.h"
#include "tokenizer/tokenizer.h"

namespace rapide {
namespace {

struct Query {
  std::string prompt;        // marked
  std::string continuation;  // the reference
};

std::string trim(std::string s) {
  const size_t first = s.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) return {};
  const size_t last = s.find_last_not_of(" \t\r\n");
  return s.substr(first, last - first + 1);
}

// Paragraphs of a text (blank-line separated), story markers removed, lines joined.
std::vector<std::string> paragraphs(const std::string& path) {
  std::string text = read_text_file(path);
  for (const char* marker : {"<|start_story|>", "<|end_story|>"}) {
    for (size_t at; (at = text.find(marker)) != std::string::npos;) {
      text.erase(at, std::string_view(marker).size());
    }
  }
  std::vector<std::string> out;
  size_t begin = 0;
  while (begin < text.size()) {
    size_t end = text.find("\n\n", begin);
    if (end == std::string::npos) end = text.size();
    std::string p = trim(text.substr(begin, end - begin));
    std::replace(p.begin(), p.end(), '\n', ' ');
    if (p.size() > 80) out.push_back(p);
    begin = end + 2;
  }
  return out;
}

// The queries: answer passage a (of the first `answers`), with distractors rotating through
// the rest until the context reaches `target_tokens` of the served model.
std::vector<Query> build_queries(const std::vector<std::string>& passages, int answers,
                                 const std::vector<int>& target_tokens, const Tokenizer& tok) {
  std::vector<Query> queries;
  for (int a = 0; a < answers; ++a) {
    const std::string& answer = passages[static_cast<size_t>(a)];
    // The answer sentence: the second of the passage; the question is its first 60 %.
    size_t s = answer.find(". ");
    const size_t start = s == std::string::npos ? 0 : s + 2;
    size_t end = answer.find('.', start);
    if (end == std::string::npos) end = answer.size();
    const std::string sentence = answer.substr(start, end + 1 - start);
    size_t cut = sentence.rfind(' ', sentence.size() * 6 / 10);
    if (cut == std::string::npos || cut == 0) cut = sentence.size() / 2;
    const std::string question = sentence.substr(0, cut);
    const std::string continuation = sentence.substr(cut);
    const int target = target_tokens[static_cast<size_t>(a) % target_tokens.size()];
    std::vector<std::string> context{answer};
    int tokens = static_cast<int>(tok.encode(answer, false).size());
    for (size_t d = 0; tokens < target && d + 1 < passages.size(); ++d) {
      const std::string& p = passages[(static_cast<size_t>(a) + 1 + d * 3) % passages.size()];
      if (p == answer) continue;
      context.push_back(p);
      tokens += static_cast<int>(tok.encode(p, false).size());
    }
    // The answer passage sits in the middle, as retrieval rarely puts it first.
    std::rotate(context.begin(), context.begin() + 1,
                context.begin() + 1 + static_cast<long>(context.size() / 2));
    std::string marked = "<context>";
    for (size_t i = 0; i < context.size(); ++i) marked += (i ? "\n\n" : "") + context[i];
    marked += "</context>\n\n" + question;
    queries.push_back({marked, continuation});
  }
  return queries;
}

struct Served {
  std::shared_ptr<const ModelFile> file;
  std::unique_ptr<Model> model;
  std::unique_ptr<Tokenizer> tokenizer;
  std::unique_ptr<ThreadPool> pool;
  std::unique_ptr<ContiguousKvStore> kv;
};

int argmax(std::span<const float> row) {
  return static_cast<int>(std::max_element(row.begin(), row.end()) - row.begin());
}

struct Measurement {
  int prompt_tokens = 0;
  double compress_seconds = 0, prefill_seconds = 0;
  double loglik_per_token = 0;
  std::vector<int32_t> greedy;
  bool applied = false;
};

// Prefill (timed) -> first token; then the continuation teacher-forced; then greedy decoding
// from the prompt's end again (the contiguous cache overwrites the positions).
Measurement measure(Served& s, const std::string& prompt, const std::string& continuation,
                    int greedy_tokens) {
  Measurement m;
  const std::vector<int32_t> ids = s.tokenizer->encode(prompt, true);
  const std::vector<int32_t> cont = s.tokenizer->encode(continuation, false);
  m.prompt_tokens = static_cast<int>(ids.size());
  const int n = m.prompt_tokens;
  const int vocab = s.model->config().vocab_size;
  Batch batch;
  const TimePoint start = Clock::now();
  std::vector<float> last;
  for (int begin = 0; begin < n; begin += 512) {
    const int end = std::min(n, begin + 512);
    batch.clear();
    for (int p = begin; p < end; ++p) batch.add(ids[p], 0, p, p + 1 == n);
    const auto logits = s.model->forward(batch, *s.kv, *s.pool);
    if (end == n) last.assign(logits.begin(), logits.end());
  }
  const int first = argmax(last);
  m.prefill_seconds = seconds_between(start, Clock::now());
  // Teacher-forced reference continuation.
  double ll = token_log_probability(last, cont[0]);
  batch.clear();
  for (size_t i = 0; i + 1 < cont.size(); ++i) batch.add(cont[i], 0, n + static_cast<int>(i), true);
  if (!batch.empty()) {
    const auto logits = s.model->forward(batch, *s.kv, *s.pool);
    for (size_t i = 0; i + 1 < cont.size(); ++i) {
      ll +=
          token_log_probability(logits.subspan(i * vocab, static_cast<size_t>(vocab)), cont[i + 1]);
    }
  }
  m.loglik_per_token = ll / static_cast<double>(cont.size());
  // Greedy answer.
  m.greedy.push_back(first);
  for (int i = 1; i < greedy_tokens; ++i) {
    batch.clear();
    batch.add(m.greedy.back(), 0, n + i - 1, true);
    m.greedy.push_back(argmax(s.model->forward(batch, *s.kv, *s.pool)));
  }
  return m;
}

double median(std::vector<double> v) {
  return percentile(v, 50.0);
}

void run(const std::string& model_path, const std::vector<std::string>& scorers,
         const std::vector<std::string>& texts, const std::vector<double>& ratios, int repeats,
         int greedy_tokens, int threads) {
  Served s;
  s.file = std::make_shared<const ModelFile>(load_model(model_path));
  s.model = std::make_unique<Model>(s.file);
  s.tokenizer = Tokenizer::create(s.file->tokenizer);
  s.pool = std::make_unique<ThreadPool>(threads);
  s.kv = std::make_unique<ContiguousKvStore>(s.model->config(), 1, 4096);

  std::vector<std::string> passages;
  for (const std::string& t : texts) {
    for (std::string& p : paragraphs(t)) passages.push_back(std::move(p));
  }
  // stories-eval.txt's paragraphs (first) are the answers.
  const std::vector<Query> queries =
      build_queries(passages, 5, {1000, 1600, 2200, 2800, 1300}, *s.tokenizer);

  struct Scorer {
    std::string name;
    std::unique_ptr<compress::TokenScorer> scorer;
  };
  std::vector<Scorer> scoring;
  for (const std::string& path : scorers) {
    const auto file =
        path == model_path ? s.file : std::make_shared<const ModelFile>(load_model(path));
    scoring.push_back({std::filesystem::path(path).filename().string(),
                       std::make_unique<compress::TokenScorer>(file, threads)});
  }

  std::printf("served model %s, %d thread(s); %zu passages; %zu queries x %d repeats\n",
              model_path.c_str(), threads, passages.size(), queries.size(), repeats);
  for (const Query& q : queries) {
    std::printf("  query: %zu context tokens, question \"...%s\", reference \"%s\"\n",
                s.tokenizer->encode(q.prompt, true).size(),
                q.prompt.substr(q.prompt.rfind("\n\n") + 2).c_str(), q.continuation.c_str());
  }

  // [scorer][cold, warm][ratio][query] -> samples.
  struct Cell {
    std::vector<double> ttft, compress;
    Measurement last;
  };
  using Table = std::vector<std::vector<Cell>>;
  std::vector<std::array<Table, 2>> cells(scoring.size());
  for (auto& modes : cells) {
    for (Table& t : modes) t.assign(ratios.size(), std::vector<Cell>(queries.size()));
  }
  for (int r = 0; r < repeats; ++r) {
    for (size_t q = 0; q < queries.size(); ++q) {
      for (size_t k = 0; k < scoring.size(); ++k) {
        for (size_t i = 0; i < ratios.size(); ++i) {
          for (int mode = 0; mode < 2; ++mode) {
            if (mode == 0) scoring[k].scorer->clear_cache();
            std::vector<std::string> texts_in{queries[q].prompt};
            compress::CompressionRequest request;
            request.ratio = ratios[i];
            const TimePoint start = Clock::now();
            compress::PromptCompressor(*scoring[k].scorer).compress(texts_in, request, 0.0);
            const double compress_seconds = seconds_between(start, Clock::now());
            Measurement m = measure(s, texts_in[0], queries[q].continuation, greedy_tokens);
            m.compress_seconds = compress_seconds;
            Cell& c = cells[k][mode][i][q];
            c.ttft.push_back(compress_seconds + m.prefill_seconds);
            c.compress.push_back(compress_seconds);
            c.last = std::move(m);
          }
        }
      }
    }
  }

  for (size_t k = 0; k < scoring.size(); ++k) {
    for (int mode = 0; mode < 2; ++mode) {
      const Table& table = cells[k][mode];
      std::printf("\nscorer %s, %s (%.1f us/token measured)\n", scoring[k].name.c_str(),
                  mode == 0 ? "cold: passages scored from scratch" : "warm: passages cached",
                  scoring[k].scorer->seconds_per_token() * 1e6);
      std::printf("%6s %14s %12s %12s %10s %9s %11s %8s\n", "ratio", "prompt tokens", "compress ms",
                  "TTFT ms", "speedup", "loglik", "d loglik", "agree");
      double base_ttft = 0, base_ll = 0;
      for (size_t i = 0; i < ratios.size(); ++i) {
        double tokens = 0, ttft = 0, comp = 0, ll = 0, agree = 0;
        for (size_t q = 0; q < queries.size(); ++q) {
          const Cell& c = table[i][q];
          // Agreement against ratio 1.0's (the first ratio's) greedy answer of the same query.
          const std::vector<int32_t>& ref = table[0][q].last.greedy;
          int same = 0;
          for (size_t t = 0; t < ref.size(); ++t) same += c.last.greedy[t] == ref[t];
          tokens += c.last.prompt_tokens;
          ttft += median(c.ttft);
          comp += median(c.compress);
          ll += c.last.loglik_per_token;
          agree += static_cast<double>(same) / static_cast<double>(ref.size());
        }
        const double nq = static_cast<double>(queries.size());
        if (i == 0) {
          base_ttft = ttft;
          base_ll = ll / nq;
        }
        std::printf("%6.2f %14.0f %12.1f %12.1f %9.2fx %9.3f %+11.3f %7.0f%%\n", ratios[i],
                    tokens / nq, comp / nq * 1e3, ttft / nq * 1e3, base_ttft / ttft, ll / nq,
                    ll / nq - base_ll, agree / nq * 100.0);
      }
    }
  }
  std::printf(
      "\nTTFT: mean over queries of the median over repeats; loglik: nats per reference "
      "token (higher is better); agree: greedy tokens equal to ratio %.2f's\n",
      ratios[0]);
}

}  // namespace
}  // namespace rapide

int main(int argc, char** argv) {
  rapide::init_logging();
  CLI::App app{"prompt compression: TTFT and answer fidelity by ratio (issue 24)"};
  std::string model;
  std::vector<std::string> scorers, texts;
  std::vector<double> ratios{1.0, 0.7, 0.5, 0.3};
  int repeats = 3, greedy = 16, threads = 1;
  app.add_option("model", model, "served model")->required();
  app.add_option("--scorer", scorers, "scoring model(s); repeatable")->required();
  app.add_option("--text", texts, "passage source text file(s); the first holds the answers")
      ->required();
  app.add_option("--ratios", ratios, "ratios, the first being the reference (1.0)")->delimiter(',');
  app.add_option("--repeats", repeats)->check(CLI::Range(1, 100));
  app.add_option("--greedy", greedy, "greedy tokens compared")->check(CLI::Range(1, 256));
  app.add_option("--threads", threads)->check(CLI::Range(1, 256));
  CLI11_PARSE(app, argc, argv);
  try {
    rapide::run(model, scorers, texts, ratios, repeats, greedy, threads);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
