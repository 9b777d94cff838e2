#include "loadgen/sse_parser.h"

namespace rapide::loadgen {

void SseParser::feed(std::string_view bytes, const Handler& on_event) {
  size_t start = 0;
  while (start < bytes.size() && !overflowed_) {
    const size_t nl = bytes.find('\n', start);
    if (nl == std::string_view::npos) {
      partial_.append(bytes.substr(start));
      if (partial_.size() > kMaxEventBytes) overflow();
      return;
    }
    partial_.append(bytes.substr(start, nl - start));
    start = nl + 1;
    std::string_view text = partial_;
    if (!text.empty() && text.back() == '\r') text.remove_suffix(1);
    line(text, on_event);
    partial_.clear();
  }
}

void SseParser::overflow() {
  overflowed_ = true;
  partial_ = std::string();
  data_ = std::string();
  has_data_ = false;
}

void SseParser::finish(const Handler& on_event) {
  if (overflowed_) return;
  if (!partial_.empty()) {
    std::string text = std::move(partial_);
    partial_.clear();
    if (!text.empty() && text.back() == '\r') text.pop_back();
    line(text, on_event);
  }
  line({}, on_event);
}

void SseParser::line(std::string_view text, const Handler& on_event) {
  if (text.empty()) {
    if (has_data_) {
      std::string data = std::move(data_);
      data_.clear();
      has_data_ = false;
      on_event(data);
    }
    return;
  }
  if (text.front() == ':') return;  // comment / keep-alive
  const size_t colon = text.find(':');
  const std::string_view field = text.substr(0, colon);
  if (field != "data") return;
  std::string_view value =
      colon == std::string_view::npos ? std::string_view{} : text.substr(colon + 1);
  if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  if (has_data_) data_ += '\n';
  data_.append(value);
  has_data_ = true;
  saw_data_ = true;
  if (data_.size() > kMaxEventBytes) overflow();
}

}  // namespace rapide::loadgen
