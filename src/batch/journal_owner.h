// Which input a batch's output and error files belong to, so that a resume never repairs
// (truncates) a file that is not one of them.
//
// Resume cuts a journal file back to its last valid record. Pointed at anything else (the
// input itself, a symlink to it, an unrelated file that happens to sit at the output path)
// that would destroy the file. So: the input, output and errors paths must name three
// different files (compared by identity, not by spelling), and each journal file carries a
// sidecar, "<file>.rapide-batch", naming the input's path, size and FNV-1a 64 checksum. A
// journal file that exists with content is reused only when its sidecar names this input:
// the same content, an earlier version the input extends (lines appended since), or the
// same input path edited since. Resume matches requests by custom_id and refuses an edited
// request that was answered (resume_plan.h), so an edit never gets a wrong answer; another
// input's journal (another path, other content) is refused outright.
#pragma once

#include <cstdint>
#include <limits>
#include <string>

namespace rapide::batch {

struct InputFingerprint {
  uint64_t bytes = 0;
  uint64_t fnv1a64 = 0;
  bool operator==(const InputFingerprint&) const = default;
};

// Reads `input` once (its first `max_bytes` only, when it is longer). Throws
// Error(kUnavailable) when it cannot be read.
InputFingerprint fingerprint_input(const std::string& input,
                                   uint64_t max_bytes = std::numeric_limits<uint64_t>::max());

// "<journal>.rapide-batch".
std::string journal_sidecar_path(const std::string& journal);

// Throws Error(kInvalidArgument) when two of the paths name the same file (same device and
// inode: hard links, symlinks and "./x" vs "x" included).
void check_distinct_files(const std::string& input, const std::string& output,
                          const std::string& errors);

// Makes `journal` safe to resume into for a batch of `input`: when it is missing or empty,
// (re)writes its sidecar (durably, before any record can be appended); when it holds bytes,
// requires its sidecar to name `fingerprint`, a prefix of the input or the input's path (the
// sidecar is then brought up to `fingerprint`), and throws Error(kInvalidArgument) saying so
// otherwise, leaving the file untouched. A journal that is not a regular file is refused too.
void claim_journal(const std::string& journal, const std::string& input,
                   const InputFingerprint& fingerprint);

}  // namespace rapide::batch
