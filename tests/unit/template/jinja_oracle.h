// Runs tests/unit/template/render_oracle.py (Python's jinja2 configured like transformers)
// on a batch of cases, so tests can require the C++ interpreter to match it byte for byte.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "template/chat_template.h"

namespace rapide::testing {

struct OracleResult {
  bool ok = false;
  bool raised = false;  // the template called raise_exception
  std::string type;     // Python exception type when !ok
  std::string message;  // exception message when !ok
  std::string output;   // rendered text when ok
};

// Thrown by run_oracle when python3 with jinja2 is not installed (tests then apply
// RAPIDE_MISSING_PREREQUISITE: a failure in CI, a loud skip elsewhere).
struct OracleUnavailable : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// One oracle case: the template source and the variables ChatTemplate::render would pass.
nlohmann::ordered_json oracle_case(const std::string& source, const ChatTemplateInputs& inputs);

// Renders every case with jinja2 in one Python process, or reuses the results a previous
// process cached for exactly these cases.
std::vector<OracleResult> run_oracle(const nlohmann::ordered_json& cases);

// What the C++ side produced for one case, in the oracle's terms.
OracleResult render_with_rapide(const std::string& source, const ChatTemplateInputs& inputs);

// Empty when `ours` matches `oracle`: identical text, or both failing, with the same message
// when the template raised it itself (and ours containing jinja2's message otherwise).
std::string compare_with_oracle(const OracleResult& ours, const OracleResult& oracle);

}  // namespace rapide::testing
