// Which tensors of a model file a consumer has taken: ModelFile::get records each name here,
// so that once a Model is built, the tensors nobody took can be refused by name
// (unused_tensors.h) instead of silently left out of the computation.
//
// Thread-safe: tensor-parallel ranks may build their Models from one ModelFile at once.
// A copy starts empty: a copied ModelFile's tensors have not been taken by anyone yet. So
// does a move (there is no move constructor): build the Model from the ModelFile it checks.
#pragma once

#include <mutex>
#include <string>
#include <unordered_set>

namespace rapide {

class TensorUseLog {
 public:
  TensorUseLog() = default;
  TensorUseLog(const TensorUseLog&) {}
  TensorUseLog& operator=(const TensorUseLog&) { return *this; }

  void record(const std::string& name) const;
  bool contains(const std::string& name) const;

 private:
  mutable std::mutex mutex_;
  mutable std::unordered_set<std::string> names_;
};

}  // namespace rapide
