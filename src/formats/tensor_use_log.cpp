#include "formats/tensor_use_log.h"

namespace rapide {

void TensorUseLog::record(const std::string& name) const {
  const std::lock_guard<std::mutex> lock(mutex_);
  names_.insert(name);
}

bool TensorUseLog::contains(const std::string& name) const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return names_.contains(name);
}

}  // namespace rapide
