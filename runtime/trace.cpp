#include "runtime/trace.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <set>
#include <vector>

#include "runtime/device.hpp"
#include "runtime/mpi.hpp"
#include "tessel/core/errors.hpp"

namespace tessel::rt::trace {

namespace detail {
std::atomic<bool> g_on{false};
}

namespace {

struct Event {
  int track;
  double ts, dur;
  std::string name;
  const char* category;
  std::string args;
};

// At most this many events are kept (a long traced run must not exhaust
// memory); the rest are counted and the count is written in the trace.
constexpr std::size_t kMaxEvents = std::size_t(1) << 21;

struct Recorder {
  std::mutex mu;
  std::vector<Event> events;
  std::size_t dropped = 0;
  std::string env_path;  // TESSEL_TRACE: written at exit
  const std::chrono::steady_clock::time_point epoch = std::chrono::steady_clock::now();

  Recorder() {
    const char* p = std::getenv("TESSEL_TRACE");
    if (p && *p) {
      env_path = p;
      detail::g_on.store(true);
    }
  }
  ~Recorder() {
    if (env_path.empty() || !detail::g_on.load()) {
      detail::g_on.store(false);  // a trace never stopped: later events (exit handlers) record nothing
      return;
    }
    std::string path = env_path;  // stop() clears it
    // Several processes: one file each (MPI may be finalized by now; its
    // rank and size stay known).
    if (mpi::size() > 1) path += ".p" + std::to_string(mpi::rank());
    try {
      std::size_t n = stop(path);
      std::fprintf(stderr, "tessel: wrote %zu trace events to %s\n", n, path.c_str());
    } catch (const std::exception& e) {
      std::fprintf(stderr, "tessel: TESSEL_TRACE=%s: %s\n", path.c_str(), e.what());
    }
  }
};

Recorder& recorder() {
  static Recorder r;
  return r;
}

// Constructed at load time, so TESSEL_TRACE turns recording on before the first event.
[[maybe_unused]] const bool g_env_read = (recorder(), true);

}  // namespace

std::string json_escape(const std::string& s) {
  std::string out;
  out.reserve(s.size() + 2);
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += char(c);
        }
    }
  }
  return out;
}

double now_us() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - recorder().epoch).count();
}

void complete(int track, const std::string& name, const char* category, double t0_us, double t1_us,
              const std::string& args) {
  Recorder& r = recorder();
  std::lock_guard<std::mutex> lk(r.mu);
  if (!detail::g_on.load(std::memory_order_relaxed)) return;
  if (r.events.size() >= kMaxEvents) {
    ++r.dropped;
    return;
  }
  r.events.push_back(Event{track, t0_us, t1_us - t0_us, name, category, args});
}

bool recording() { return on(); }

void start() {
  Recorder& r = recorder();
  std::lock_guard<std::mutex> lk(r.mu);
  if (detail::g_on.load())
    throw ValueError(r.env_path.empty() ? "profiler::start_trace: a trace is already being recorded (stop_trace first)"
                                        : "profiler::start_trace: TESSEL_TRACE=" + r.env_path +
                                              " is recording this process's trace already");
  r.events.clear();
  r.dropped = 0;
  detail::g_on.store(true);
}

std::size_t stop(const std::string& path) {
  Recorder& r = recorder();
  std::vector<Event> events;
  std::size_t dropped = 0;
  {
    std::lock_guard<std::mutex> lk(r.mu);
    if (!detail::g_on.load()) throw ValueError("profiler::stop_trace: no trace is being recorded (start_trace first)");
    detail::g_on.store(false);
    events.swap(r.events);
    dropped = r.dropped;
    r.env_path.clear();
  }
  std::ofstream os(path);
  if (!os) throw ValueError("profiler: cannot write the trace to '" + path + "'");
  // The process's index and its devices, when its runtime is up (at exit
  // it may be gone: then process 0 and the devices that have events).
  int pid = 0, first = 0, count = 0;
  if (Runtime::started()) {
    const Runtime& rt = Runtime::get();
    pid = rt.process_of(rt.first_device_id());
    first = rt.first_device_id();
    count = rt.device_count();
  }
  char host[256] = "host";
  gethostname(host, sizeof host - 1);
  os << "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"producer\":\"tessel\",\"dropped_events\":" << dropped
     << "},\n\"traceEvents\":[\n";
  // Names of the process and its tracks, in a fixed order: dispatch,
  // compile, then the devices by id.
  os << "{\"ph\":\"M\",\"pid\":" << pid << ",\"name\":\"process_name\",\"args\":{\"name\":\"tessel process " << pid
     << " (" << json_escape(host) << ")\"}}";
  std::set<int> tracks{kDispatchTrack, kCompileTrack};
  for (int d = 0; d < count; ++d) tracks.insert(device_track(first + d));
  for (auto& e : events) tracks.insert(e.track);
  for (int t : tracks) {
    const std::string name = t == kDispatchTrack ? "host dispatch"
                             : t == kCompileTrack ? "compile"
                                                  : "device " + std::to_string(t - device_track(0));
    os << ",\n{\"ph\":\"M\",\"pid\":" << pid << ",\"tid\":" << t << ",\"name\":\"thread_name\",\"args\":{\"name\":\""
       << name << "\"}}";
    os << ",\n{\"ph\":\"M\",\"pid\":" << pid << ",\"tid\":" << t
       << ",\"name\":\"thread_sort_index\",\"args\":{\"sort_index\":" << t << "}}";
  }
  char num[64];
  for (auto& e : events) {
    os << ",\n{\"ph\":\"X\",\"pid\":" << pid << ",\"tid\":" << e.track << ",\"name\":\"" << json_escape(e.name)
       << "\",\"cat\":\"" << e.category << "\"";
    std::snprintf(num, sizeof num, ",\"ts\":%.3f,\"dur\":%.3f", e.ts, e.dur < 0 ? 0.0 : e.dur);
    os << num;
    if (!e.args.empty()) os << ",\"args\":{" << e.args << "}";
    os << "}";
  }
  os << "\n]}\n";
  os.close();
  if (!os) throw ValueError("profiler: writing the trace to '" + path + "' failed");
  return events.size();
}

}  // namespace tessel::rt::trace
