// The ORC JIT: one LLJIT for the process, targeting the host CPU (its own
// features: AVX2, AVX-512 where present), optimising every module at O3 with
// loop and SLP vectorisation, compiled to an object file that is linked into
// a JITDylib of its own. Kernels are cached by an exact key of their IR
// (docs/architecture.md, principle 12), and freed from the JIT when the
// last executable holding them dies. With a disk cache directory
// (config().compilation_cache_dir), kernels' object files are stored there
// and a later process links them without running LLVM.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace llvm {
class Module;
class LLVMContext;
class TargetMachine;
}  // namespace llvm

namespace tessel::codegen {

// The code of one compiled module: the addresses of its symbols. Its machine
// code is removed from the JIT when the last reference goes.
struct CompiledModule {
  std::vector<void*> symbols;
  std::size_t code_bytes = 0;  // machine code and data the JIT allocated for it
  ~CompiledModule();
  struct Impl;
  std::unique_ptr<Impl> impl;
};
using ModuleRef = std::shared_ptr<const CompiledModule>;

// A function marked with this attribute writes a result too large for the
// caches: after optimisation the JIT makes its vector stores through the
// output pointer non-temporal where they are aligned to their size (x86's
// MOVNT needs that; the rest stay plain). The output pointer is the
// function's first argument, aligned to kStreamAlign by attribute, or a
// load carrying metadata of the same name.
inline constexpr const char* kStreamAttr = "tessel-stream";
inline constexpr std::size_t kStreamAlign = 64;

// A module to compile: its IR and the symbols to look up in it.
struct ModuleSource {
  std::unique_ptr<llvm::LLVMContext> context;
  std::unique_ptr<llvm::Module> module;
  std::vector<std::string> symbols;
};

// What the calling thread's compiles did (cumulative; the compile log
// takes differences around one program's compile).
struct JitThreadStats {
  std::size_t llvm_compiles = 0;  // modules optimised and compiled by LLVM
  std::size_t disk_hits = 0;      // modules linked from the disk cache
  std::size_t disk_stores = 0;    // object files written to the disk cache
  std::size_t disk_rejected = 0;  // entries found but not used (corrupt, another CPU or build)
  double llvm_seconds = 0;        // optimisation + code generation
};

class Jit {
 public:
  static Jit& get();

  // A fresh module set up for the host (triple, data layout).
  std::unique_ptr<llvm::Module> new_module(const std::string& name, llvm::LLVMContext& context);
  // The host target machine (its CPU and features).
  const llvm::TargetMachine& target_machine() const;

  // Kernel cache: the module compiled for `key` (exact bytes), built by
  // `make` on a miss. The cache holds modules weakly: one nobody holds is
  // gone. With a disk cache directory set, a miss first looks there (the
  // entry must match the key's bytes, this host and this build exactly),
  // and a module LLVM compiles is stored there.
  ModuleRef cached(const std::string& key, const std::function<ModuleSource()>& make);
  // The disk cache directory (empty: none). Created when first written.
  void set_disk_cache(const std::string& dir);
  // Modules alive now (cached or not).
  std::size_t cache_size() const;
  std::size_t live_modules() const;
  static JitThreadStats thread_stats();

  ~Jit();

 private:
  friend struct CompiledModule;
  Jit();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tessel::codegen
