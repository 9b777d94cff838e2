// When requests are sent: closed loop (N users, each sends its next request when the last
// one finished) or open loop at a rate, with Poisson or burstier gamma inter-arrival times.
//
// An open loop is what a public endpoint sees: arrivals do not slow down when the server
// does, so queueing shows up in TTFT. A closed loop measures capacity at fixed concurrency.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace rapide::loadgen {

struct ArrivalPattern {
  // Closed loop when concurrency > 0 and rate <= 0; open loop when rate > 0 (concurrency then
  // caps requests in flight, 0 = no cap). rate = infinity sends everything at once.
  int concurrency = 0;
  double rate = 0;  // requests per second
  // Gamma shape of the inter-arrival times: 1 = Poisson, < 1 burstier, > 1 more regular.
  double burstiness = 1.0;
  uint64_t seed = 0;

  bool open_loop() const { return rate > 0; }
  std::string label() const;  // "rate=4/s" or "concurrency=8"
};

// Send offsets (seconds from the start) of `count` open-loop arrivals: cumulative gamma
// inter-arrival times with mean 1/rate and shape `burstiness`; all zero for an infinite rate.
std::vector<double> arrival_offsets(const ArrivalPattern& pattern, size_t count);

// "1,2,4,inf" -> {1, 2, 4, infinity}. Throws Error(kInvalidArgument) on a bad entry.
std::vector<double> parse_rates(const std::string& text);

}  // namespace rapide::loadgen
