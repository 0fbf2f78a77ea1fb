// What each pass of the compile driver made: verified between passes (debug
// builds), timed (the compile log, and an event on the trace's compile track)
// and, under a dump directory (config().dump_dir / TESSEL_DUMP_DIR), written
// as <n>.<program>.<k>-<pass>.txt, one file per pass in order.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "tracer/ir.hpp"

namespace tessel::compiler {

// The IR verifier after `after_pass` in debug builds (the sanitizer builds
// are debug builds): a pass that breaks an invariant is named at once.
void verified(const Graph& g, const char* after_pass);

// A pass's time runs from the previous pass's end.
class PassLog {
 public:
  // program: the name of the program (the trace's events); dump_dir: where
  // dump() writes, none when empty.
  PassLog(std::string program, std::string dump_dir);
  // A pass that made graph g (text: how to print it; to_text(g) by default).
  const Graph& after(const char* pass, const Graph& g, const std::string* text = nullptr);
  // A pass that made something printed as text.
  void record(const char* pass, const std::string& text);
  // The pipeline's input, made by `pass` before the driver (not timed here).
  void given(const char* pass, const Graph& g);
  // Each pass's name and seconds, in order.
  const std::vector<std::pair<std::string, double>>& times() const { return times_; }
  // Writes every pass's text under the dump directory, if any.
  void dump(const std::string& program) const;

 private:
  void timed(const char* pass);
  std::string program_;
  std::string dump_dir_;
  double t_us_;  // the previous pass's end (the trace clock)
  std::vector<std::pair<std::string, double>> times_;
  std::vector<std::pair<std::string, std::string>> texts_;
};

}  // namespace tessel::compiler
