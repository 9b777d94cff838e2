#include "batch/jsonl_reader.h"

#include "base/error.h"

namespace rapide::batch {

JsonlReader::JsonlReader(const std::string& path) : in_(path, std::ios::binary) {
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

uint64_t count_jsonl_lines(const std::string& path) {
  JsonlReader reader(path);
  std::string line;
  uint64_t count = 0;
  while (reader.next(line)) ++count;
  return count;
}

}  // namespace rapide::batch
