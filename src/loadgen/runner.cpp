#include "loadgen/runner.h"

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/steady_timer.hpp>
#include <deque>
#include <memory>

namespace rapide::loadgen {

namespace asio = boost::asio;

namespace {

class Run {
 public:
  Run(asio::io_context& io, Backend& backend, const std::vector<Conversation>& workload,
      const RunnerOptions& options)
      : io_(io),
        backend_(backend),
        workload_(workload),
        options_(options),
        arrival_timer_(io),
        progress_timer_(io),
        work_(asio::make_work_guard(io)) {
    size_t index = 0;
    for (const Conversation& c : workload_) {
      first_index_.push_back(index);
      index += c.turns.size();
    }
    result_.records.resize(index);
    result_.arrival = options.arrival;
    result_.label = options.arrival.label();
  }

  RunResult run() {
    start_ = Clock::now();
    const ArrivalPattern& a = options_.arrival;
    if (workload_.empty()) {
      work_.reset();
    } else if (a.open_loop()) {
      offsets_ = arrival_offsets(a, workload_.size());
      schedule_arrival();
    } else {
      const size_t users = static_cast<size_t>(std::max(1, a.concurrency));
      for (size_t u = 0; u < users && next_ < workload_.size(); ++u) start_conversation(next_++);
    }
    if (options_.progress && options_.progress_interval > 0) schedule_progress();
    io_.run();
    io_.restart();
    result_.summary = summarize(result_.records, options_.slo);
    if (options_.progress) options_.progress(snapshot(true));
    return std::move(result_);
  }

 private:
  struct Active {
    size_t conversation;
    size_t turn = 0;
    std::vector<ChatMessage> history;
  };

  void schedule_arrival() {
    if (next_ >= workload_.size()) return;
    arrival_timer_.expires_at(start_ + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(offsets_[next_])));
    arrival_timer_.async_wait([this](boost::system::error_code ec) {
      if (ec) return;
      // Every arrival whose time has come (several at once for bursts or an infinite rate).
      const double now = seconds_between(start_, Clock::now());
      while (next_ < workload_.size() && offsets_[next_] <= now) {
        const int cap = options_.arrival.concurrency;
        if (cap > 0 && active_ >= static_cast<size_t>(cap)) {
          waiting_.push_back(next_++);
        } else {
          start_conversation(next_++);
        }
      }
      schedule_arrival();
    });
  }

  void start_conversation(size_t index) {
    ++active_;
    auto state = std::make_shared<Active>();
    state->conversation = index;
    state->history = workload_[index].preamble;
    send_turn(std::move(state));
  }

  void send_turn(std::shared_ptr<Active> state) {
    const Conversation& c = workload_[state->conversation];
    const Turn& turn = c.turns[state->turn];
    state->history.push_back({"user", turn.user});
    BenchRequest request{state->history, turn.output_tokens};
    RequestRecord record;
    record.index = first_index_[state->conversation] + state->turn;
    record.conversation = static_cast<int64_t>(state->conversation);
    record.turn = static_cast<int>(state->turn);
    record.expected_output_tokens = turn.output_tokens;
    const TimePoint sent = Clock::now();
    record.send_time = seconds_between(start_, sent);
    ++in_flight_;
    backend_.send(request, sent, std::move(record),
                  [this, state](RequestRecord&& done) { on_done(state, std::move(done)); });
  }

  void on_done(const std::shared_ptr<Active>& state, RequestRecord&& record) {
    --in_flight_;
    ++finished_;
    if (!record.ok()) ++failed_;
    // The next turn carries the real answer, so the server sees its own output as history.
    state->history.push_back({"assistant", record.output_text});
    record.output_text.clear();
    const size_t slot = record.index;
    result_.records[slot] = std::move(record);
    if (++state->turn < workload_[state->conversation].turns.size()) {
      send_turn(state);
      return;
    }
    --active_;
    if (!options_.arrival.open_loop()) {
      if (next_ < workload_.size()) start_conversation(next_++);
    } else if (!waiting_.empty()) {
      const size_t index = waiting_.front();
      waiting_.pop_front();
      start_conversation(index);
    }
    if (finished_ == result_.records.size()) {
      progress_timer_.cancel();
      arrival_timer_.cancel();
      work_.reset();
    }
  }

  void schedule_progress() {
    progress_timer_.expires_after(std::chrono::duration_cast<Clock::duration>(
        std::chrono::duration<double>(options_.progress_interval)));
    progress_timer_.async_wait([this](boost::system::error_code ec) {
      if (ec) return;
      options_.progress(snapshot(false));
      schedule_progress();
    });
  }

  Progress snapshot(bool final) const {
    Progress p;
    p.label = result_.label;
    p.total = result_.records.size();
    p.done = finished_;
    p.failed = failed_;
    p.in_flight = in_flight_;
    p.elapsed = seconds_between(start_, Clock::now());
    p.final = final;
    std::vector<double> ttft, tpot;
    for (const RequestRecord& r : result_.records) {
      if (!r.ok() || r.token_times.empty()) continue;
      ttft.push_back(r.ttft());
      if (r.tpot() >= 0) tpot.push_back(r.tpot());
    }
    p.ttft_p50 = describe(std::move(ttft)).p50;
    p.tpot_p50 = describe(std::move(tpot)).p50;
    return p;
  }

  asio::io_context& io_;
  Backend& backend_;
  const std::vector<Conversation>& workload_;
  const RunnerOptions& options_;
  asio::steady_timer arrival_timer_;
  asio::steady_timer progress_timer_;
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  std::vector<size_t> first_index_;
  std::vector<double> offsets_;
  std::deque<size_t> waiting_;
  TimePoint start_;
  size_t next_ = 0;
  size_t active_ = 0;
  size_t in_flight_ = 0;
  size_t finished_ = 0;
  size_t failed_ = 0;
  RunResult result_;
};

}  // namespace

RunResult run_benchmark(asio::io_context& io, Backend& backend,
                        const std::vector<Conversation>& workload, const RunnerOptions& options) {
  Run run(io, backend, workload, options);
  return run.run();
}

}  // namespace rapide::loadgen
