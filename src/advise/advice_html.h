// The advisor's findings as a section of `rapide bench --html`'s report: the headline (or
// "nothing to change"), then each question with its evidence, verdict, lever, expected
// effect and cost, as a table. Escaped, self-contained HTML like the rest of the report.
#pragma once

#include <string>

#include "advise/advisor.h"

namespace rapide::advise {

std::string render_advice_html(const Advice& advice);

}  // namespace rapide::advise
