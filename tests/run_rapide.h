// Runs the built `rapide` binary from a test, the way a user would: the tests of the CLI
// commands share this one runner.
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <string>

#include "test_paths.h"

namespace rapide::testing {

struct CliResult {
  int exit_code = -1;  // -1 when killed by a signal
  std::string out;     // stdout, and stderr (logs, figures, errors) unless dropped
};

// `args` go through the shell (quote as on a command line); `env` ("NAME=VALUE ...") sets
// environment variables for this run only.
inline CliResult run_rapide(const std::string& args, bool keep_stderr = true,
                            const std::string& env = "") {
  CliResult r;
  const std::string command = (env.empty() ? "" : "env " + env + " ") + rapide_binary() + " " +
                              args + (keep_stderr ? " 2>&1" : " 2>/dev/null");
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return r;
  char buffer[4096];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0) r.out.append(buffer, n);
  const int status = ::pclose(pipe);
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  return r;
}

}  // namespace rapide::testing
