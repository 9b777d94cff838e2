// One KV op of every kind, with distinct fields: what the plan codecs' round-trip tests
// (step_json, plan_broadcast) encode and read back, written once.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "model/kv_ops.h"

namespace rapide::testing {

inline std::vector<KvOp> every_kv_op() {
  return {KvOp::copy(3, 4),
          KvOp::copy_slots(5, 6, 7),
          KvOp::offload(8, 0xfeed, 9, {1, 2}),
          KvOp::restore(10, 0xbeef),
          KvOp::import(11, std::make_shared<const std::vector<uint8_t>>(
                               std::vector<uint8_t>{0, 1, 0xab, 0xff})),
          KvOp::forget(0xdead)};
}

}  // namespace rapide::testing
