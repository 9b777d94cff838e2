#include "sampling/stop_checker.h"

#include <algorithm>

#include "base/error.h"

namespace rapide {
namespace {

// How many bytes at the end of `text` form an incomplete UTF-8 character (0 when the text
// ends on a character boundary or in bytes that are not valid UTF-8 anyway).
size_t incomplete_utf8_tail(std::string_view text) {
  const size_t look_back = std::min<size_t>(3, text.size());
  for (size_t i = 1; i <= look_back; ++i) {
    const auto byte = static_cast<unsigned char>(text[text.size() - i]);
    if ((byte & 0xC0) == 0x80) continue;  // continuation byte: keep looking for the lead
    size_t length = 1;
    if ((byte & 0xE0) == 0xC0) {
      length = 2;
    } else if ((byte & 0xF0) == 0xE0) {
      length = 3;
    } else if ((byte & 0xF8) == 0xF0) {
      length = 4;
    }
    return length > i ? i : 0;
  }
  return 0;
}

}  // namespace

StopChecker::StopChecker(std::vector<std::string> stop_strings) : stops_(std::move(stop_strings)) {
  for (size_t i = 0; i < stops_.size(); ++i) {
    if (stops_[i].empty()) fail(ErrorCode::kInvalidArgument, "stop[{}] must not be empty", i);
    longest_stop_ = std::max(longest_stop_, stops_[i].size());
  }
}

StopOutput StopChecker::push(std::string_view piece) {
  StopOutput out;
  if (stopped_) return out;
  pending_.append(piece);

  size_t first = std::string::npos;
  for (size_t i = 0; i < stops_.size(); ++i) {
    const size_t pos = pending_.find(stops_[i]);
    if (pos < first) {
      first = pos;
      out.stop_index = static_cast<int>(i);
    }
  }
  if (first != std::string::npos) {
    out.text = pending_.substr(0, first);
    out.stopped = stopped_ = true;
    matched_ = stops_[static_cast<size_t>(out.stop_index)];
    pending_.clear();
    return out;
  }

  size_t emit = pending_.size() - partial_match_length();
  emit -= incomplete_utf8_tail(std::string_view(pending_).substr(0, emit));
  out.text = pending_.substr(0, emit);
  pending_.erase(0, emit);
  return out;
}

std::string StopChecker::flush() {
  std::string rest;
  rest.swap(pending_);
  return rest;
}

size_t StopChecker::partial_match_length() const {
  const std::string_view text(pending_);
  const size_t longest = std::min(text.size(), longest_stop_ > 0 ? longest_stop_ - 1 : 0);
  for (size_t length = longest; length > 0; --length) {
    const std::string_view suffix = text.substr(text.size() - length);
    for (const std::string& stop : stops_) {
      if (stop.size() > length && std::string_view(stop).starts_with(suffix)) return length;
    }
  }
  return 0;
}

}  // namespace rapide
