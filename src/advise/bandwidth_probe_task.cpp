#include "advise/bandwidth_probe_task.h"

#include "kernels/bandwidth.h"

namespace rapide::advise {

namespace {

class BandwidthProbeTask final : public BackgroundTask {
 public:
  BandwidthProbeTask(std::function<void(double)> done, size_t bytes, int passes)
      : done_(std::move(done)), probe_(bytes, passes) {}

  bool run_slice(ThreadPool& pool) override {
    if (!probe_.run_piece(pool)) return false;
    done_(probe_.result().best);
    return true;
  }
  void abandon(const std::string&) override { done_(0.0); }

 private:
  std::function<void(double)> done_;
  ReadBandwidthProbe probe_;
};

}  // namespace

std::unique_ptr<BackgroundTask> bandwidth_probe_task(std::function<void(double)> done, size_t bytes,
                                                     int passes) {
  return std::make_unique<BandwidthProbeTask>(std::move(done), bytes, passes);
}

}  // namespace rapide::advise
