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

// `when` in UTC, formatted by strftime. gmtime_r, not gmtime: gmtime's result is one static
// buffer, and the asynchronous checkpoint writer stamps its files while the main thread stamps
// the next checkpoint's metadata (a race ThreadSanitizer reported).
inline std::string utc_time(std::time_t when, const char* format) {
  std::tm broken_down{};
  gmtime_r(&when, &broken_down);
  char stamp[64];
  std::strftime(stamp, sizeof stamp, format, &broken_down);
  return stamp;
}

// Now, UTC, ISO 8601: "2026-11-29T12:00:00Z".
inline std::string utc_timestamp() { return utc_time(std::time(nullptr), "%Y-%m-%dT%H:%M:%SZ"); }

// Now, UTC, compact and without colons, for file names and run ids: "20261129T120000Z".
inline std::string utc_compact_stamp() { return utc_time(std::time(nullptr), "%Y%m%dT%H%M%SZ"); }

// The median of the samples (the mean of the middle two for an even count); 0 for none.
inline double median(std::vector<double> values) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

}  // namespace trident
