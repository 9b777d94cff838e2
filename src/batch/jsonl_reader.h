// Streams a JSONL file one line at a time, so a batch input of any size costs one line of
// memory. Line numbers are physical (1-based, blank lines counted) so an error report points
// at the line an editor shows.
#pragma once

#include <cstdint>
#include <fstream>
#include <string>

namespace rapide::batch {

class JsonlReader {
 public:
  // Throws Error(kNotFound) when the file cannot be opened, Error(kInvalidArgument) when
  // `path` is a directory or another non-regular file.
  explicit JsonlReader(const std::string& path);

  // The next non-blank line without its line ending; false at the end of the file. A last
  // line without a trailing newline is returned like any other.
  bool next(std::string& line);
  // The physical line number of the line next() returned last.
  uint64_t line_number() const { return line_number_; }

 private:
  std::ifstream in_;
  uint64_t line_number_ = 0;
};

// Whether a line holds only whitespace (such lines are not requests and are skipped).
bool is_blank(const std::string& line);

}  // namespace rapide::batch
