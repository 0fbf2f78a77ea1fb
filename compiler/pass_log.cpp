// Verifying, timing and dumping the driver's passes (compiler/pass_log.hpp).
#include "compiler/pass_log.hpp"

#include <atomic>
#include <filesystem>
#include <fstream>

#include "runtime/trace.hpp"
#include "tessel/core/errors.hpp"

namespace tessel::compiler {

namespace {
std::atomic<int> g_dump_counter{0};
}  // namespace

void verified(const Graph& g, const char* after_pass) {
#ifndef NDEBUG
  try {
    verify(g);
  } catch (const InternalError& e) {
    throw InternalError(std::string("after pass ") + after_pass + ": " + e.what());
  }
#else
  (void)g, (void)after_pass;
#endif
}

PassLog::PassLog(std::string program, std::string dump_dir)
    : program_(std::move(program)), dump_dir_(std::move(dump_dir)), t_us_(rt::trace::now_us()) {}

const Graph& PassLog::after(const char* pass, const Graph& g, const std::string* text) {
  timed(pass);
  verified(g, pass);
  if (!dump_dir_.empty()) texts_.emplace_back(pass, text ? *text : to_text(g));
  return g;
}

void PassLog::record(const char* pass, const std::string& text) {
  timed(pass);
  if (!dump_dir_.empty()) texts_.emplace_back(pass, text);
}

void PassLog::given(const char* pass, const Graph& g) {
  verified(g, pass);
  if (!dump_dir_.empty()) texts_.emplace_back(pass, to_text(g));
}

void PassLog::dump(const std::string& program) const {
  if (dump_dir_.empty()) return;
  std::error_code ec;
  std::filesystem::create_directories(dump_dir_, ec);
  if (ec || !std::filesystem::is_directory(dump_dir_, ec))
    throw ValueError("config().dump_dir / TESSEL_DUMP_DIR '" + dump_dir_ +
                     "' is not a directory that can be created or written" + (ec ? ": " + ec.message() : std::string()));
  const std::string base = dump_dir_ + "/" + std::to_string(g_dump_counter++) + "." + program;
  for (size_t k = 0; k < texts_.size(); ++k)
    std::ofstream(base + "." + std::to_string(k + 1) + "-" + texts_[k].first + ".txt") << texts_[k].second;
}

void PassLog::timed(const char* pass) {
  const double us = rt::trace::now_us();
  times_.emplace_back(pass, (us - t_us_) * 1e-6);
  if (rt::trace::on()) rt::trace::complete(rt::trace::kCompileTrack, std::string(pass) + " " + program_, "compile", t_us_, us);
  t_us_ = us;
}

}  // namespace tessel::compiler
