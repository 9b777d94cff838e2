#include "advise/advice_html.h"

#include <fmt/format.h>

#include "loadgen/svg_chart.h"

namespace rapide::advise {

std::string render_advice_html(const Advice& advice) {
  using loadgen::xml_escape;
  std::string out = "<h2>rapide advise</h2>\n";
  out += fmt::format("<p>{}</p>\n", xml_escape(advice.subject));
  out += fmt::format("<p><b>{}</b></p>\n", xml_escape(headline_text(advice)));
  out +=
      "<table><tr><th>question</th><th>evidence</th><th>verdict</th><th>lever</th>"
      "<th>expected</th><th>cost</th></tr>\n";
  for (const Finding& f : advice.findings) {
    std::string evidence;
    for (const std::string& e : f.evidence) evidence += xml_escape(e) + "<br>";
    std::string lever;
    if (f.fires) {
      lever = xml_escape(f.lever) + (f.available ? "" : " <i>(not available in rapide yet)</i>");
      if (!f.flags.empty()) lever += "<br><code>" + xml_escape(change_text(f)) + "</code>";
    }
    out += fmt::format(
        "<tr><td>{}{}</td><td style=\"text-align:left\">{}</td><td style=\"text-align:left\">{}"
        "</td><td style=\"text-align:left\">{}</td><td>{}</td><td style=\"text-align:left\">{}"
        "</td></tr>\n",
        f.question <= 6 ? fmt::format("{}. ", f.question) : "+ ", xml_escape(f.title), evidence,
        f.fires ? "<b>" + xml_escape(f.verdict) + "</b>" : xml_escape(f.verdict), lever,
        f.fires ? xml_escape(f.effect) : "", f.fires ? xml_escape(f.cost) : "");
  }
  return out + "</table>\n";
}

}  // namespace rapide::advise
