// Elapsed time, wall-clock stamps and the median of timings: the measuring helpers every
// module that times something shares.
#pragma once

#include <algorithm>
#include <chrono>
#include <ctime>
#include <string>
#include <vector>

namespace trident {

using SteadyClock = std::chrono::steady_clock;

// Now on the steady clock, in seconds from an arbitrary origin: for differences and deadlines.
inline double steady_seconds() {
  return std::chrono::duration<double>(SteadyClock::now().time_since_epoch()).count();
}

// Seconds from `start` to now (steady clock).
inline double seconds_since(SteadyClock::time_point start) {
  return std::chrono::duration<double>(SteadyClock::now() - start).count();
}

// Now, UTC, ISO 8601: "2026-11-29T12:00:00Z".
inline std::string utc_timestamp() {
  const std::time_t now = std::time(nullptr);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  return stamp;
}

// The median of the samples (the mean of the middle two for an even count); 0 for none.
inline double median(std::vector<double> values) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

}  // namespace trident
