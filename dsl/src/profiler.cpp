#include <tessel/profiler.hpp>

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <mutex>

#include <tessel/device.hpp>

#include "runtime/trace.hpp"
#include "tessel/core/errors.hpp"

namespace tessel::profiler {

namespace {
std::mutex g_mu;
std::string g_dir;  // of the trace being recorded by start_trace
int g_count = 0;
}  // namespace

void start_trace(const std::string& log_dir) {
  std::lock_guard<std::mutex> lk(g_mu);
  if (log_dir.empty()) throw ValueError("profiler::start_trace: log_dir is empty");
  std::error_code ec;
  std::filesystem::create_directories(log_dir, ec);
  if (ec || !std::filesystem::is_directory(log_dir, ec))
    throw ValueError("profiler::start_trace: '" + log_dir + "' is not a directory that can be created" +
                     (ec ? ": " + ec.message() : std::string()));
  process_index();  // the runtime is up: the trace names this process and its devices
  rt::trace::start();
  g_dir = log_dir;
}

std::string stop_trace() {
  std::lock_guard<std::mutex> lk(g_mu);
  if (g_dir.empty()) throw ValueError("profiler::stop_trace: no trace was started with start_trace");
  char host[256] = "host";
  gethostname(host, sizeof host - 1);
  const std::string path = g_dir + "/" + host + ".p" + std::to_string(process_index()) + "." +
                           std::to_string(g_count++) + ".trace.json";
  g_dir.clear();
  rt::trace::stop(path);
  return path;
}

Trace::~Trace() {
  if (stopped_) return;
  try {
    stop_trace();
  } catch (...) {
    // A destructor must not throw; stop() reports the same error.
  }
}

std::string Trace::stop() {
  if (!stopped_) path_ = stop_trace(), stopped_ = true;
  return path_;
}

TraceAnnotation::TraceAnnotation(std::string name) : name_(std::move(name)), t0_(rt::trace::on() ? rt::trace::now_us() : -1) {}

TraceAnnotation::~TraceAnnotation() {
  if (t0_ < 0) return;
  try {
    rt::trace::complete(rt::trace::kDispatchTrack, name_, "annotation", t0_, rt::trace::now_us());
  } catch (...) {
    // Dropped (no memory), never thrown from a destructor.
  }
}

}  // namespace tessel::profiler
