#include "formats/model_file.h"

#include "base/error.h"

namespace rapide {

int64_t TensorView::element_count() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return shape.empty() ? 0 : n;
}

int64_t TensorView::rows() const {
  int64_t n = 1;
  for (size_t i = 1; i < shape.size(); ++i) n *= shape[i];
  return n;
}

const TensorView* ModelFile::find(const std::string& name) const {
  for (const auto& t : tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

const TensorView& ModelFile::get(const std::string& name) const {
  const TensorView* t = find(name);
  if (t == nullptr) fail(ErrorCode::kNotFound, "model '{}' has no tensor '{}'", path, name);
  used.record(name);
  return *t;
}

uint64_t ModelFile::total_tensor_bytes() const {
  uint64_t total = 0;
  for (const auto& t : tensors) total += t.size_bytes;
  return total;
}

}  // namespace rapide
