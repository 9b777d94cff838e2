#include "batch/record_journal.h"

#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "api/api_error.h"
#include "api/json_limited.h"
#include "base/error.h"
#include "base/logging.h"

namespace rapide::batch {

namespace {

constexpr std::string_view kIdPrefix = "batch_req_";

// The line and custom_id a record names, or nullopt when `text` is not a whole record.
std::optional<std::pair<uint64_t, std::optional<std::string>>> parse_record(
    const std::string& text) {
  nlohmann::json record;
  try {
    record = api::parse_json_limited(text, "the record");
  } catch (const api::ApiError&) {
    return std::nullopt;
  }
  if (!record.is_object()) return std::nullopt;
  const auto id = record.find("id");
  if (id == record.end() || !id->is_string()) return std::nullopt;
  const std::optional<uint64_t> line = line_of_record_id(id->get<std::string>());
  if (!line) return std::nullopt;
  std::optional<std::string> custom_id;
  if (const auto c = record.find("custom_id"); c != record.end() && c->is_string()) {
    custom_id = c->get<std::string>();
  }
  return std::make_pair(*line, std::move(custom_id));
}

}  // namespace

std::string record_id(uint64_t line) {
  return std::string(kIdPrefix) + std::to_string(line);
}

std::optional<uint64_t> line_of_record_id(const std::string& id) {
  if (!id.starts_with(kIdPrefix)) return std::nullopt;
  const char* begin = id.data() + kIdPrefix.size();
  const char* end = id.data() + id.size();
  uint64_t line = 0;
  const auto [ptr, ec] = std::from_chars(begin, end, line);
  if (ec != std::errc() || ptr != end || begin == end || line == 0) return std::nullopt;
  return line;
}

Recovery recover_records(const std::string& path, DoneLines& done) {
  Recovery recovery;
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return recovery;
  const uint64_t size = std::filesystem::file_size(path, ec);
  if (ec) fail(ErrorCode::kUnavailable, "cannot read '{}': {}", path, ec.message());

  std::ifstream in(path, std::ios::binary);
  if (!in) fail(ErrorCode::kUnavailable, "cannot open '{}' to resume from it", path);
  uint64_t valid_end = 0;  // offset just past the last valid record's newline
  std::string text;
  while (std::getline(in, text)) {
    // getline at the end of a file without a final newline still returns the text: that
    // is a torn record, written up to the kill.
    if (in.eof()) break;
    const auto record = parse_record(text);
    if (!record) break;  // everything from an unreadable record on is redone
    const auto [it, inserted] = done.emplace(record->first, record->second);
    if (!inserted) {
      fail(ErrorCode::kCorrupt,
           "'{}' answers input line {} a second time: the output and error files must come "
           "from runs of this same input (use new file names for a new batch)",
           path, record->first);
    }
    ++recovery.records;
    valid_end += text.size() + 1;
  }
  in.close();
  if (valid_end < size) {
    recovery.truncated_bytes = size - valid_end;
    std::filesystem::resize_file(path, valid_end, ec);
    if (ec) fail(ErrorCode::kUnavailable, "cannot repair '{}': {}", path, ec.message());
    spdlog::warn("{}: cut {} bytes of a torn or unreadable last record; its line runs again", path,
                 recovery.truncated_bytes);
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
