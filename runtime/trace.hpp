// A Chrome trace (the trace-event JSON format that Perfetto and
// chrome://tracing open) of what the process does: one track per device
// (thunks: kernels, dots, library calls, collectives with their bytes, waits
// at rendezvous), one for host dispatch and one for compilation (each pass).
// Recording is off until start() (ts::profiler::start_trace) or env
// TESSEL_TRACE=path (from the first event to exit); off, an event costs one
// relaxed atomic load.
#pragma once

#include <atomic>
#include <cstddef>
#include <string>

namespace tessel::rt::trace {

namespace detail {
extern std::atomic<bool> g_on;
}

inline bool on() { return detail::g_on.load(std::memory_order_relaxed); }

// Tracks (the trace's thread ids): host dispatch, compilation, and one per device.
inline constexpr int kDispatchTrack = 1;
inline constexpr int kCompileTrack = 2;
inline int device_track(int device_id) { return 100 + device_id; }

// Microseconds since the process's trace clock began.
double now_us();

// One complete event ("ph": "X") on `track` from t0 to t1 (microseconds).
// `args` is a JSON object's members without braces (`"bytes": 64`), or empty.
void complete(int track, const std::string& name, const char* category, double t0_us, double t1_us,
              const std::string& args = {});

// The span of a scope as one event; nothing when recording is off.
class Span {
 public:
  Span(int track, const char* category) : track_(track), category_(category), t0_(on() ? now_us() : -1) {}
  Span(const Span&) = delete;
  Span& operator=(const Span&) = delete;
  bool active() const { return t0_ >= 0; }
  // Set before the scope ends (only read when active()).
  std::string name, args;
  ~Span() {
    if (t0_ < 0) return;
    try {
      complete(track_, name, category_, t0_, now_us(), args);
    } catch (...) {
      // An event that cannot be recorded (no memory) is dropped, never thrown from here.
    }
  }

 private:
  int track_;
  const char* category_;
  double t0_;
};

// Begins recording events (clearing any recorded); TraceError-like misuse
// (already started) throws tessel::ValueError.
void start();
// Stops recording and writes the events to `path` as trace-event JSON;
// returns the number of events written.
std::size_t stop(const std::string& path);
bool recording();

// JSON string escaping (names carry quotes: P('x')).
std::string json_escape(const std::string& s);

}  // namespace tessel::rt::trace
