// ts::profiler: where the time goes, as a Chrome trace (jax.profiler).
//
//   ts::profiler::start_trace("/tmp/trace");
//   ... run jitted functions ...
//   std::string file = ts::profiler::stop_trace();  // open it in https://ui.perfetto.dev
//
// The file is trace-event JSON with one track per device (every thunk:
// fused kernels, dots, library calls such as LAPACK and FFTW, collectives
// with their bytes, and the waits for peers inside them), one for host
// dispatch (calls, transfers, user annotations) and one for compilation
// (tracing, each pass of the pipeline, each LLVM kernel compile). Env
// TESSEL_TRACE=path records the whole process and writes `path` at exit.
#pragma once

#include <string>

namespace tessel::profiler {

// Begins recording into a new trace file in `log_dir` (created if missing).
// ValueError when a trace is being recorded already.
void start_trace(const std::string& log_dir);
// Stops recording, writes the file and returns its path:
// <log_dir>/<host>.p<process>.<n>.trace.json.
std::string stop_trace();

// jax.profiler.trace: records for the scope's lifetime.
class Trace {
 public:
  explicit Trace(const std::string& log_dir) { start_trace(log_dir); }
  Trace(const Trace&) = delete;
  Trace& operator=(const Trace&) = delete;
  ~Trace();
  // The file written, once the scope has ended: use stop() to get it earlier.
  std::string stop();

 private:
  bool stopped_ = false;
  std::string path_;
};

// jax.profiler.TraceAnnotation: a named span on the host dispatch track.
class TraceAnnotation {
 public:
  explicit TraceAnnotation(std::string name);
  TraceAnnotation(const TraceAnnotation&) = delete;
  TraceAnnotation& operator=(const TraceAnnotation&) = delete;
  ~TraceAnnotation();

 private:
  std::string name_;
  double t0_;
};

}  // namespace tessel::profiler
