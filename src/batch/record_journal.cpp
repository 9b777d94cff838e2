#include "batch/record_journal.h"

#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/api_error.h"
#include "api/json_limited.h"
#include "base/error.h"
#include "base/logging.h"

namespace rapide::batch {

namespace {

constexpr std::string_view kIdPrefix = "batch_req_";

// What a record answers, or nullopt when `text` is not a whole record.
std::optional<RecordKey> parse_record(const std::string& text) {
  nlohmann::json record;
  try {
    record = api::parse_json_limited(text, "the record");
  } catch (const api::ApiError&) {
    return std::nullopt;
  }
  if (!record.is_object()) return std::nullopt;
  const auto id = record.find("id");
  if (id == record.end() || !id->is_string()) return std::nullopt;
  std::optional<RecordKey> key = parse_record_id(id->get<std::string>());
  if (!key) return std::nullopt;
  if (const auto c = record.find("custom_id"); c != record.end() && c->is_string()) {
    key->custom_id = c->get<std::string>();
  }
  return key;
}

// Adds `key` to `answered`; false when its request is there already.
bool add_answer(AnsweredRequests& answered, RecordKey key) {
  if (key.custom_id) {
    const std::string id = *key.custom_id;
    return answered.by_custom_id.emplace(id, std::move(key)).second;
  }
  const uint64_t line = key.line;
  return answered.by_line.emplace(line, std::move(key)).second;
}

std::optional<uint64_t> parse_decimal(std::string_view text) {
  uint64_t value = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || ptr != text.data() + text.size() || text.empty()) return std::nullopt;
  return value;
}

}  // namespace

std::string record_id(uint64_t line, uint64_t digest) {
  return fmt::format("{}{}_{:016x}", kIdPrefix, line, digest);
}

std::optional<RecordKey> parse_record_id(const std::string& id) {
  if (!id.starts_with(kIdPrefix)) return std::nullopt;
  std::string_view rest(id);
  rest.remove_prefix(kIdPrefix.size());
  RecordKey key;
  const size_t underscore = rest.find('_');
  const std::optional<uint64_t> line = parse_decimal(rest.substr(0, underscore));
  if (!line || *line == 0) return std::nullopt;
  key.line = *line;
  if (underscore == std::string_view::npos) return key;  // an earlier version's id
  const std::string_view hex = rest.substr(underscore + 1);
  uint64_t digest = 0;
  const auto [ptr, ec] = std::from_chars(hex.data(), hex.data() + hex.size(), digest, 16);
  if (hex.size() != 16 || ec != std::errc() || ptr != hex.data() + hex.size()) {
    return std::nullopt;
  }
  key.digest = digest;
  return key;
}

Recovery recover_records(const std::string& path, AnsweredRequests& answered) {
  Recovery recovery;
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return recovery;
  const uint64_t size = std::filesystem::file_size(path, ec);
  if (ec) fail(ErrorCode::kUnavailable, "cannot read '{}': {}", path, ec.message());

  std::ifstream in(path, std::ios::binary);
  if (!in) fail(ErrorCode::kUnavailable, "cannot open '{}' to resume from it", path);
  uint64_t valid_end = 0;            // offset just past the last valid record's newline
  uint64_t offset = 0;               // of the line being read
  uint64_t number = 0;               // its line number in the file
  std::vector<uint64_t> unreadable;  // line numbers since the last valid record
  std::vector<uint64_t> corrupt;     // unreadable lines with valid records after them
  std::string text;
  while (std::getline(in, text)) {
    ++number;
    // getline at the end of a file without a final newline still returns the text: that
    // is a torn record, written up to the kill.
    if (in.eof()) break;
    offset += text.size() + 1;
    std::optional<RecordKey> record = parse_record(text);
    if (!record) {
      unreadable.push_back(number);
      continue;
    }
    // Valid records after unreadable lines: those lines are damage, not a torn tail.
    corrupt.insert(corrupt.end(), unreadable.begin(), unreadable.end());
    unreadable.clear();
    const RecordKey key = *record;
    if (!add_answer(answered, std::move(*record))) {
      fail(ErrorCode::kCorrupt,
           "'{}' line {} answers {} a second time: the output and error files must come from "
           "runs of one batch (use new file names for a new batch)",
           path, number,
           key.custom_id ? fmt::format("custom_id '{}'", *key.custom_id)
                         : fmt::format("input line {}", key.line));
    }
    ++recovery.records;
    valid_end = offset;
  }
  in.close();
  if (!corrupt.empty()) {
    recovery.corrupt_lines = corrupt.size();
    spdlog::warn(
        "{}: {} corrupt line(s) in the middle (the first is line {}), not a torn last record: "
        "left in place, the records after them are kept, and the requests they answered (if "
        "any) run again",
        path, corrupt.size(), corrupt.front());
  }
  if (valid_end < size) {
    recovery.truncated_bytes = size - valid_end;
    std::filesystem::resize_file(path, valid_end, ec);
    if (ec) fail(ErrorCode::kUnavailable, "cannot repair '{}': {}", path, ec.message());
    spdlog::warn("{}: cut {} bytes of a torn or unreadable last record; its request runs again",
                 path, recovery.truncated_bytes);
  }
  return recovery;
}

RecordWriter::RecordWriter(const std::string& path, SyncPolicy policy, FileSyscalls& files)
    : path_(path), policy_(policy), files_(files), last_sync_(Clock::now()) {
  const bool existed = std::filesystem::exists(path);
  fd_ = files_.open_append(path);
  if (fd_ < 0) {
    fail(ErrorCode::kUnavailable, "cannot open '{}' for appending: {}", path, std::strerror(errno));
  }
  // A crash could otherwise lose a new file together with its synced contents.
  if (!existed) files_.sync_directory(std::filesystem::absolute(path).parent_path().string());
}

RecordWriter::~RecordWriter() {
  if (fd_ < 0) return;
  if (unsynced_ > 0) files_.fdatasync(fd_);
  files_.close(fd_);
}

void RecordWriter::append(const std::string& record) {
  std::string line = record;
  line.push_back('\n');
  // One write() per record: a kill leaves whole records plus at most a torn last one.
  const char* data = line.data();
  size_t left = line.size();
  while (left > 0) {
    const ssize_t written = files_.write(fd_, data, left);
    if (written < 0) {
      if (errno == EINTR) continue;
      fail(ErrorCode::kUnavailable, "cannot write to '{}': {}", path_, std::strerror(errno));
    }
    data += written;
    left -= static_cast<size_t>(written);
  }
  ++unsynced_;
  if (unsynced_ >= policy_.every_records ||
      seconds_between(last_sync_, Clock::now()) >= policy_.every_seconds) {
    sync();
  }
}

void RecordWriter::sync() {
  if (unsynced_ > 0 && files_.fdatasync(fd_) != 0) {
    fail(ErrorCode::kUnavailable, "cannot sync '{}': {}", path_, std::strerror(errno));
  }
  unsynced_ = 0;
  last_sync_ = Clock::now();
}

}  // namespace rapide::batch
