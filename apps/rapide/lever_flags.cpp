#include "apps/rapide/lever_flags.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "base/error.h"
#include "base/logging.h"

namespace rapide::cli {

namespace {

// `rapide quantize IN OUT --type TYPE` with this very binary.
std::string quantize_model(const std::string& model, const std::string& type,
                           const std::string& scratch_dir) {
  const std::string out = (std::filesystem::path(scratch_dir) /
                           (std::filesystem::path(model).stem().string() + "-" + type + ".gguf"))
                              .string();
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  const pid_t pid = fork();
  if (pid < 0) fail(ErrorCode::kInternal, "fork failed");
  if (pid == 0) {
    dup2(STDERR_FILENO, STDOUT_FILENO);  // its progress must not mix into advise's output
    execl(self.c_str(), self.c_str(), "quantize", model.c_str(), out.c_str(), "--type",
          type.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    fail(ErrorCode::kInternal, "rapide quantize {} {} --type {} failed", model, out, type);
  }
  return out;
}

}  // namespace

void apply_lever(BenchOptions& o, const std::vector<std::pair<std::string, std::string>>& flags,
                 const std::string& scratch_dir) {
  EngineFlags& e = o.engine_flags;
  for (const auto& [flag, value] : flags) {
    if (flag == "--prefix-cache") {
      e.prefix_cache = value;
    } else if (flag == "--batching") {
      e.batching = value;
    } else if (flag == "--kv-layout") {
      e.kv_layout = value;
    } else if (flag == "--kv-block-size") {
      e.options.kv_block_size = std::stoi(value);
    } else if (flag == "--prefill-chunk") {
      e.options.prefill_chunk = std::stoi(value);
    } else if (flag == "--max-seqs") {
      e.options.max_seqs = std::stoi(value);
    } else if (flag == "--max-batch-tokens") {
      e.options.max_batch_tokens = std::stoi(value);
    } else if (flag == "--kv-memory") {
      e.options.kv_memory = value;
    } else if (flag == "--kv-type") {
      e.kv_type = value;
    } else if (flag == "--kv-offload-ram") {
      e.options.kv_offload_ram = value;
    } else if (flag == "--spec") {
      e.spec = value;
    } else if (flag == "--draft-model") {
      e.draft_model = value;
    } else if (flag == "--quantize") {
      o.model.model_path = quantize_model(o.model.model_path, value, scratch_dir);
    } else {
      fail(ErrorCode::kInvalidArgument, "no way to apply {} {}", flag, value);
    }
    spdlog::info("advise: lever {} {}", flag, value);
  }
}

}  // namespace rapide::cli
