// Which lines of a batch input earlier runs answered, decided for the whole input before
// anything runs.
//
// Requests are matched by custom_id, not by line number, so lines may be reordered,
// inserted or appended between runs. A line without a usable custom_id (it becomes an
// error record) is identified by its line number and digest instead. Nothing runs when:
//   * a custom_id appears on two lines (which of them would an answer belong to?), or
//   * a line whose custom_id was answered changed since (its digest differs from the one
//     its record names): its answer would be attached to a request it did not answer.
// Records of requests the input no longer has are counted (and left in the files).
#pragma once

#include <cstdint>
#include <string>
#include <unordered_set>

#include "batch/record_journal.h"

namespace rapide::batch {

struct ResumePlan {
  uint64_t total_lines = 0;                     // non-blank input lines
  std::unordered_set<uint64_t> answered_lines;  // to skip: answered by an earlier run
  uint64_t orphaned_records = 0;                // answers of requests this input does not have
};

// Reads `input` once (one line of memory plus its custom_ids). Throws
// Error(kInvalidArgument) naming the lines in the two cases above; `journals` names the
// output files in that message.
ResumePlan plan_resume(const std::string& input, const AnsweredRequests& answered,
                       const std::string& journals);

}  // namespace rapide::batch
