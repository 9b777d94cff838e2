// Sends benchmark requests straight to an in-process Engine: the same workloads without HTTP,
// JSON or SSE, so their cost is the difference to an HTTP run.
#pragma once

#include <boost/asio/io_context.hpp>

#include "engine/engine.h"
#include "loadgen/backend.h"
#include "sampling/sampling_params.h"

namespace rapide::loadgen {

class EngineBackend final : public Backend {
 public:
  // `sampling` is the template of every request (max_tokens, min_tokens and ignore_eos are
  // set per request). The engine must outlive the backend and every request in flight.
  EngineBackend(boost::asio::io_context& io, Engine& engine, SamplingParams sampling,
                std::string model_label);
  void send(const BenchRequest& request, TimePoint start, RequestRecord record,
            RecordHandler done) override;
  std::string describe() const override;

 private:
  boost::asio::io_context& io_;
  Engine& engine_;
  SamplingParams sampling_;
  std::string model_label_;
  uint64_t next_seed_ = 0;
};

}  // namespace rapide::loadgen
