#include "batch/jsonl_reader.h"

#include <filesystem>

#include "base/error.h"

namespace rapide::batch {

namespace {

// A directory opens as an empty stream (a batch of nothing, "success"); a FIFO cannot be
// read twice (the resume plan, then the run). Both are refused by name.
const std::string& regular_file(const std::string& path) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (std::filesystem::is_directory(status)) {
    fail(ErrorCode::kInvalidArgument, "the batch input '{}' is a directory, not a JSONL file",
         path);
  }
  if (std::filesystem::exists(status) && !std::filesystem::is_regular_file(status)) {
    fail(ErrorCode::kInvalidArgument, "the batch input '{}' is not a regular file", path);
  }
  return path;
}

}  // namespace

JsonlReader::JsonlReader(const std::string& path) : in_(regular_file(path), std::ios::binary) {
  if (!in_) fail(ErrorCode::kNotFound, "cannot open the batch input '{}'", path);
}

bool is_blank(const std::string& line) {
  return line.find_first_not_of(" \t\r\n") == std::string::npos;
}

bool JsonlReader::next(std::string& line) {
  while (std::getline(in_, line)) {
    ++line_number_;
    if (!line.empty() && line.back() == '\r') line.pop_back();  // files written on Windows
    if (!is_blank(line)) return true;
  }
  return false;
}

}  // namespace rapide::batch
