#include "batch/journal_owner.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include <fmt/format.h>

#include "base/error.h"
#include "batch/fnv1a.h"

namespace rapide::batch {

namespace fs = std::filesystem;

namespace {

constexpr int kSidecarVersion = 1;
// A sidecar is a few hundred bytes; anything much larger is not one.
constexpr std::streamsize kMaxSidecarBytes = 64 * 1024;

std::string hex(uint64_t v) {
  return fmt::format("{:016x}", v);
}

void write_durably(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail(ErrorCode::kUnavailable, "cannot write '{}': {}", tmp, std::strerror(errno));
  const bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) &&
                  ::fsync(fd) == 0;
  ::close(fd);
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
    fail(ErrorCode::kUnavailable, "cannot write '{}': {}", path, std::strerror(errno));
  }
  const std::string dir = fs::absolute(path).parent_path().string();
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

struct SidecarContents {
  InputFingerprint fingerprint;
  std::string input;  // the input's absolute path when the journal was claimed
};

// The absolute path a sidecar names an input by.
std::string input_identity(const std::string& input) {
  std::error_code ec;
  const fs::path canonical = fs::weakly_canonical(fs::absolute(input), ec);
  return ec ? fs::absolute(input).string() : canonical.string();
}

// What a sidecar names, or nothing when it is missing or not a sidecar.
std::optional<SidecarContents> read_sidecar(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::string text(static_cast<size_t>(kMaxSidecarBytes), '\0');
  in.read(text.data(), kMaxSidecarBytes);
  text.resize(static_cast<size_t>(in.gcount()));
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || j.value("rapide_batch_journal", 0) != kSidecarVersion) return std::nullopt;
  const auto bytes = j.find("input_bytes");
  const auto sum = j.find("input_fnv1a64");
  if (bytes == j.end() || !bytes->is_number_unsigned() || sum == j.end() || !sum->is_string()) {
    return std::nullopt;
  }
  SidecarContents c;
  c.fingerprint.bytes = bytes->get<uint64_t>();
  try {
    c.fingerprint.fnv1a64 = std::stoull(sum->get<std::string>(), nullptr, 16);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  if (const auto in = j.find("input"); in != j.end() && in->is_string()) {
    c.input = in->get<std::string>();
  }
  return c;
}

}  // namespace

InputFingerprint fingerprint_input(const std::string& input, uint64_t max_bytes) {
  std::ifstream in(input, std::ios::binary);
  if (!in) fail(ErrorCode::kUnavailable, "cannot read the input '{}'", input);
  InputFingerprint f;
  f.fnv1a64 = kFnv1aOffset;
  std::vector<char> chunk(1 << 20);
  while (in && f.bytes < max_bytes) {
    const uint64_t want = std::min<uint64_t>(chunk.size(), max_bytes - f.bytes);
    in.read(chunk.data(), static_cast<std::streamsize>(want));
    const auto n = static_cast<size_t>(in.gcount());
    f.fnv1a64 = fnv1a64(std::string_view(chunk.data(), n), f.fnv1a64);
    f.bytes += n;
  }
  return f;
}

std::string journal_sidecar_path(const std::string& journal) {
  return journal + ".rapide-batch";
}

void check_distinct_files(const std::string& input, const std::string& output,
                          const std::string& errors) {
  const auto same = [](const std::string& a, const std::string& b) {
    if (a == b) return true;
    std::error_code ec;
    // false (with ec) when either does not exist: a missing file is no other file.
    return fs::equivalent(a, b, ec) && !ec;
  };
  if (same(input, output) || same(input, errors) || same(output, errors)) {
    fail(ErrorCode::kInvalidArgument,
         "the input, output and errors files must be three different files (got -i '{}', "
         "-o '{}', --errors '{}')",
         input, output, errors);
  }
}

void claim_journal(const std::string& journal, const std::string& input,
                   const InputFingerprint& fingerprint) {
  std::error_code ec;
  const fs::file_status status = fs::status(journal, ec);
  const bool exists = fs::exists(status);
  if (exists && !fs::is_regular_file(status)) {
    fail(ErrorCode::kInvalidArgument, "'{}' exists and is not a regular file", journal);
  }
  const uint64_t size = exists ? fs::file_size(journal, ec) : 0;
  const std::string sidecar = journal_sidecar_path(journal);
  const std::optional<SidecarContents> sidecar_contents = read_sidecar(sidecar);
  const InputFingerprint* named = sidecar_contents ? &sidecar_contents->fingerprint : nullptr;
  const std::string identity = input_identity(input);
  if (exists && size > 0) {
    if (!named) {
      fail(ErrorCode::kInvalidArgument,
           "'{}' already exists and is not the output of a batch of '{}' (no '{}' names "
           "its input): refusing to resume into it or repair it; remove it or choose "
           "another file name",
           journal, input, sidecar);
    }
    // The input may have grown since (lines appended): its first named->bytes must be
    // what the journal answered.
    const InputFingerprint prefix =
        named->bytes == fingerprint.bytes ? fingerprint : fingerprint_input(input, named->bytes);
    // The same input edited since: resume by custom_id finds out request by request.
    const bool same_input = sidecar_contents->input == identity;
    if (prefix != *named && !same_input) {
      fail(ErrorCode::kInvalidArgument,
           "'{}' belongs to a batch of another input ('{}', {} bytes, checksum {}; the first {} "
           "bytes of '{}' have checksum {}): refusing to resume into it; use new output file "
           "names for a new input",
           journal, sidecar_contents->input, named->bytes, hex(named->fnv1a64), prefix.bytes, input,
           hex(prefix.fnv1a64));
    }
  }
  if (named && *named == fingerprint && sidecar_contents->input == identity) return;
  nlohmann::json j;
  j["rapide_batch_journal"] = kSidecarVersion;
  j["input"] = identity;
  j["input_bytes"] = fingerprint.bytes;
  j["input_fnv1a64"] = hex(fingerprint.fnv1a64);
  write_durably(sidecar, j.dump() + "\n");
}

}  // namespace rapide::batch
