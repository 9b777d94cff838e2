#include "loadgen/bench_report.h"

#include <cmath>
#include <fstream>

#include "base/error.h"

namespace rapide::loadgen {

namespace {

nlohmann::json distribution_to_json(const Distribution& d) {
  return {{"count", d.count}, {"mean", d.mean}, {"p50", d.p50}, {"p90", d.p90},
          {"p95", d.p95},     {"p99", d.p99},   {"max", d.max}};
}

nlohmann::json record_to_json(const RequestRecord& r) {
  nlohmann::json j = {{"index", r.index},
                      {"conversation", r.conversation},
                      {"turn", r.turn},
                      {"send_time", r.send_time},
                      {"ttft", r.ttft()},
                      {"tpot", r.tpot()},
                      {"e2e", r.e2e()},
                      {"prompt_tokens", r.prompt_tokens},
                      {"output_tokens", r.output_tokens},
                      {"expected_output_tokens", r.expected_output_tokens},
                      {"usage_reported", r.usage_reported},
                      {"error", error_kind_name(r.error)},
                      {"token_times", r.token_times}};
  if (r.http_status) j["http_status"] = r.http_status;
  if (!r.error_message.empty()) j["error_message"] = r.error_message;
  return j;
}

RequestRecord record_from_json(const nlohmann::json& j) {
  RequestRecord r;
  r.index = j.value("index", uint64_t{0});
  r.conversation = j.value("conversation", int64_t{0});
  r.turn = j.value("turn", 0);
  r.send_time = j.value("send_time", 0.0);
  r.end_time = j.value("e2e", 0.0);
  r.prompt_tokens = j.value("prompt_tokens", 0);
  r.output_tokens = j.value("output_tokens", 0);
  r.expected_output_tokens = j.value("expected_output_tokens", 0);
  r.usage_reported = j.value("usage_reported", false);
  r.error = parse_error_kind(j.value("error", std::string("none")));
  r.http_status = j.value("http_status", 0);
  r.error_message = j.value("error_message", std::string());
  if (j.contains("token_times")) r.token_times = j["token_times"].get<std::vector<double>>();
  return r;
}

// JSON has no infinity; an unbounded rate is written as the string "inf".
nlohmann::json rate_to_json(double rate) {
  if (std::isinf(rate)) return "inf";
  return rate;
}

double rate_from_json(const nlohmann::json& j) {
  if (j.is_string()) return INFINITY;
  return j.is_number() ? j.get<double>() : 0.0;
}

}  // namespace

nlohmann::json summary_to_json(const RunSummary& s) {
  nlohmann::json j = {{"requests", s.requests},
                      {"completed", s.completed},
                      {"failed", s.failed},
                      {"failures", s.failures},
                      {"duration_s", s.duration},
                      {"prompt_tokens", s.prompt_tokens},
                      {"output_tokens", s.output_tokens},
                      {"request_throughput", s.request_throughput},
                      {"output_throughput", s.output_throughput},
                      {"total_token_throughput", s.total_token_throughput},
                      {"ttft_s", distribution_to_json(s.ttft)},
                      {"tpot_s", distribution_to_json(s.tpot)},
                      {"itl_s", distribution_to_json(s.itl)},
                      {"e2e_s", distribution_to_json(s.e2e)}};
  if (!s.slo.empty()) {
    j["slo"] = s.slo.to_string();
    j["good"] = s.good;
    j["goodput"] = s.goodput;
  }
  return j;
}

nlohmann::json report_to_json(const BenchReport& report) {
  // Pairs, not an object: nlohmann::json sorts object keys, and the order is the author's.
  nlohmann::json settings = nlohmann::json::array();
  for (const auto& [key, value] : report.settings) settings.push_back({key, value});
  nlohmann::json runs = nlohmann::json::array();
  for (const RunResult& run : report.runs) {
    nlohmann::json requests = nlohmann::json::array();
    for (const RequestRecord& r : run.records) requests.push_back(record_to_json(r));
    runs.push_back({{"label", run.label},
                    {"arrival",
                     {{"concurrency", run.arrival.concurrency},
                      {"rate", rate_to_json(run.arrival.rate)},
                      {"burstiness", run.arrival.burstiness},
                      {"seed", run.arrival.seed}}},
                    {"summary", summary_to_json(run.summary)},
                    {"requests", std::move(requests)}});
  }
  return {{"format", "rapide-bench/1"},      {"backend", report.backend},
          {"workload", report.workload},     {"slo", report.slo.to_string()},
          {"settings", std::move(settings)}, {"runs", std::move(runs)}};
}

BenchReport report_from_json(const nlohmann::json& j) {
  if (!j.is_object() || j.value("format", std::string()) != "rapide-bench/1" ||
      !j.contains("runs") || !j["runs"].is_array()) {
    fail(ErrorCode::kCorrupt,
         "not a rapide bench result (expected \"format\": \"rapide-bench/1\")");
  }
  BenchReport report;
  report.backend = j.value("backend", std::string());
  report.workload = j.value("workload", std::string());
  report.slo = parse_slo(j.value("slo", std::string()));
  if (j.contains("settings") && j["settings"].is_array()) {
    for (const nlohmann::json& pair : j["settings"]) {
      if (pair.is_array() && pair.size() == 2 && pair[0].is_string() && pair[1].is_string()) {
        report.settings.emplace_back(pair[0].get<std::string>(), pair[1].get<std::string>());
      }
    }
  }
  for (const nlohmann::json& r : j["runs"]) {
    RunResult run;
    run.label = r.value("label", std::string());
    if (r.contains("arrival")) {
      const nlohmann::json& a = r["arrival"];
      run.arrival.concurrency = a.value("concurrency", 0);
      run.arrival.rate = rate_from_json(a.value("rate", nlohmann::json(0.0)));
      run.arrival.burstiness = a.value("burstiness", 1.0);
      run.arrival.seed = a.value("seed", uint64_t{0});
    }
    if (r.contains("requests")) {
      for (const nlohmann::json& q : r["requests"]) run.records.push_back(record_from_json(q));
    }
    run.summary = summarize(run.records, report.slo);
    report.runs.push_back(std::move(run));
  }
  return report;
}

void write_report_file(const std::string& path, const BenchReport& report) {
  std::ofstream out(path);
  if (!out) fail(ErrorCode::kNotFound, "cannot write '{}'", path);
  out << report_to_json(report).dump(1) << '\n';
  if (!out) fail(ErrorCode::kInternal, "writing '{}' failed", path);
}

BenchReport read_report_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) fail(ErrorCode::kNotFound, "cannot open '{}'", path);
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded()) fail(ErrorCode::kCorrupt, "'{}' is not JSON", path);
  try {
    return report_from_json(j);
  } catch (const nlohmann::json::exception& e) {
    fail(ErrorCode::kCorrupt, "'{}': {}", path, e.what());
  }
}

}  // namespace rapide::loadgen
