#include "batch/batch_seed.h"

#include "batch/fnv1a.h"

namespace rapide::batch {

uint64_t derive_seed(std::string_view custom_id) {
  uint64_t h = fnv1a64(custom_id);
  // splitmix64's finalizer.
  h += 0x9e3779b97f4a7c15ull;
  h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ull;
  h = (h ^ (h >> 27)) * 0x94d049bb133111ebull;
  return h ^ (h >> 31);
}

}  // namespace rapide::batch
