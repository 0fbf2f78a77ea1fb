// The layout rules of docs/architecture.md ("Layers" and principle 7),
// checked on the sources.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

namespace fs = std::filesystem;

namespace {
std::string read(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}
std::vector<fs::path> sources(const std::string& folder) {
  std::vector<fs::path> out;
  for (auto& e : fs::recursive_directory_iterator(fs::path(TESSEL_SOURCE_DIR) / folder))
    if (e.is_regular_file() && (e.path().extension() == ".hpp" || e.path().extension() == ".cpp")) out.push_back(e.path());
  return out;
}
bool includes(const std::string& text, const std::string& pattern) {
  return std::regex_search(text, std::regex("#\\s*include\\s*[<\"]" + pattern));
}
}  // namespace

TEST_CASE("public headers include no LLVM, oneDNN or TBB") {
  auto headers = sources("dsl/tessel");
  REQUIRE(headers.size() >= 8);
  for (auto& h : headers) {
    CAPTURE(h.string());
    std::string t = read(h);
    CHECK_FALSE(includes(t, "llvm"));
    CHECK_FALSE(includes(t, "oneapi"));
    CHECK_FALSE(includes(t, "tbb"));
    CHECK_FALSE(includes(t, "dnnl"));
    CHECK_FALSE(includes(t, "runtime/"));
    CHECK_FALSE(includes(t, "codegen/"));
    // Installed as they are: only <tessel/...> and the standard library, Boost.
    CHECK_FALSE(includes(t, "tracer/"));
    CHECK_FALSE(includes(t, "\""));
  }
}

TEST_CASE("LLVM is included only through codegen/llvm_headers.hpp, and oneDNN only in codegen") {
  for (std::string folder : {"dsl", "tracer", "runtime", "codegen", "compiler", "samples"}) {
    for (auto& f : sources(folder)) {
      CAPTURE(f.string());
      std::string t = read(f);
      bool gateway = f.filename() == "llvm_headers.hpp";
      if (!gateway) CHECK_FALSE(includes(t, "llvm/"));
      if (folder != "codegen") {
        CHECK_FALSE(includes(t, "dnnl"));
        CHECK_FALSE(includes(t, "codegen/llvm_headers"));
      }
    }
  }
}

TEST_CASE("the tracer includes nothing of LLVM, oneDNN or TBB, nor the other folders") {
  for (auto& f : sources("tracer")) {
    CAPTURE(f.string());
    std::string t = read(f);
    CHECK_FALSE(includes(t, "oneapi"));
    CHECK_FALSE(includes(t, "tbb"));
    CHECK_FALSE(includes(t, "runtime/"));
    CHECK_FALSE(includes(t, "codegen/"));
    // Of the public headers, only the vocabulary every layer shares.
    CHECK_FALSE(includes(t, "tessel/(?!core/)"));
  }
}

TEST_CASE("the compile driver includes no user-facing header, nor dsl/") {
  auto files = sources("compiler");
  REQUIRE(files.size() >= 4);
  for (auto& f : files) {
    CAPTURE(f.string());
    std::string t = read(f);
    CHECK_FALSE(includes(t, "dsl/"));
    CHECK_FALSE(includes(t, "tessel/(?!core/)"));
    CHECK_FALSE(includes(t, "llvm"));
  }
}

TEST_CASE("tessel/core, the vocabulary every layer shares, includes only the standard library and itself") {
  auto headers = sources("dsl/tessel/core");
  REQUIRE(headers.size() >= 4);
  for (auto& h : headers) {
    CAPTURE(h.string());
    std::regex inc("#\\s*include\\s*[<\"]([^>\"]+)[>\"]");
    std::string t = read(h);
    for (std::sregex_iterator it(t.begin(), t.end(), inc), end; it != end; ++it) {
      std::string inc_path = (*it)[1];
      CHECK_MESSAGE((inc_path.find('/') == std::string::npos || inc_path.rfind("tessel/core/", 0) == 0), inc_path);
    }
  }
}

TEST_CASE("samples include only the umbrella header (and each other)") {
  for (auto& f : sources("samples")) {
    CAPTURE(f.string());
    std::string t = read(f);
    std::regex inc("#\\s*include\\s*[<\"]([^>\"]+)[>\"]");
    for (std::sregex_iterator it(t.begin(), t.end(), inc), end; it != end; ++it) {
      std::string h = (*it)[1];
      bool ok = h == "tessel/tessel.hpp" || h.rfind("samples/", 0) == 0 ||
                h.find('/') == std::string::npos;  // standard headers
      CHECK_MESSAGE(ok, h);
    }
  }
}
