// Options every model-using subcommand shares (-m, --tokenizer, --threads, --act-quant,
// --mlock, ...), and loading a model with its tokenizer from them.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "distributed/parallel_job.h"
#include "engine/proposer.h"
#include "formats/model_file.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace rapide::cli {

struct ModelOptions {
  std::string model_path;
  std::string tokenizer_path;
  int threads = 0;                 // 0 = physical cores
  std::string act_quant = "int8";  // --act-quant: int8 | off | bf16 (kernels/matmul.h ActQuant)
  int tp = 1;                      // --tp: tensor-parallel ranks (mpirun -np N)
  int pp = 1;                      // --pp: pipeline stages (mpirun -np N)
  int pp_micro_batches = 0;        // --pp-micro-batches (0: one per stage)
  std::string memory_limit;        // --memory-limit: weights one rank may hold (empty: any)
  bool mlock = false;              // --mlock: lock the loaded weights in RAM
  std::vector<std::string> loras;  // --lora NAME=PATH[:SCALE], each added to the model
  std::string lora_use;            // --lora-use NAME: the adapter the command runs with
};

void add_model_options(CLI::App& command, ModelOptions& options);
// --lora and --lora-use, for the commands that run one adapter (run, perplexity). The server
// and the other commands do not take adapters yet: they refuse the flag as unknown.
void add_lora_options(CLI::App& command, ModelOptions& options);

struct LoadedModel {
  // First, so it goes last: the model calls it until then, and its end releases followers.
  std::unique_ptr<ParallelJob> parallel;  // --tp / --pp only
  std::shared_ptr<const ModelFile> file;
  std::unique_ptr<Model> model;
  std::unique_ptr<Tokenizer> tokenizer;
  std::unique_ptr<ThreadPool> pool;
};

// Loads and prepares the model, logging what was loaded and how long it took. With --tp N or
// --pp N (rapide-mpi under mpirun -np N) only rank 0 returns: the other ranks load their shard or
// stage, serve the leader's forward passes (distributed/parallel_job.h) and exit when it
// is done.
LoadedModel load_for_inference(const ModelOptions& options);
// True on the ranks of a --tp / --pp job other than 0: they call load_for_inference (which
// does not return there) before anything a front end would start, such as a listener.
bool is_follower_rank(const ModelOptions& options);

// The adapter a one-adapter command runs with: --lora-use's (kInvalidArgument when no --lora
// has that name), else the only --lora, else -1 (the model alone). Several --lora without
// --lora-use is kInvalidArgument.
int32_t chosen_lora(const ModelOptions& options, const Model& model);

// --mlock (load_for_inference calls it; a model built in memory, such as serve's demo, calls
// it itself): locks every page the process holds in RAM, the weights among them. Throws
// Error(kResourceExhausted) naming RLIMIT_MEMLOCK when the kernel refuses.
void lock_model_in_ram();

// --draft-model, loaded when given: the Engine's draft argument points into it.
struct LoadedDraft {
  LoadedModel loaded;
  std::unique_ptr<DraftModel> ref;
};
std::unique_ptr<LoadedDraft> load_draft_model(const std::string& path);

}  // namespace rapide::cli
