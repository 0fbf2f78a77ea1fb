// The ORC JIT: one LLJIT for the process, targeting the host CPU (its own
// features: AVX2, AVX-512 where present), optimising every module at O3 with
// loop and SLP vectorisation before it is compiled. Kernels are cached by a
// exact key of their IR (STYLE.md 12), and freed from the JIT when the last
// executable holding them dies.
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

class Jit {
 public:
  static Jit& get();

  // Optimises and compiles `module`, returning the addresses of `symbols`.
  ModuleRef compile(std::unique_ptr<llvm::Module> module, std::unique_ptr<llvm::LLVMContext> context,
                    const std::vector<std::string>& symbols);
  // A fresh module set up for the host (triple, data layout).
  std::unique_ptr<llvm::Module> new_module(const std::string& name, llvm::LLVMContext& context);
  // The host target machine (its CPU and features).
  const llvm::TargetMachine& target_machine() const;

  // Kernel cache: the module compiled for `key` (exact bytes), built by
  // `make` on a miss. The cache holds modules weakly: one nobody holds is gone.
  ModuleRef cached(const std::string& key, const std::function<ModuleRef()>& make);
  // Modules alive now (cached or not).
  std::size_t cache_size() const;
  std::size_t live_modules() const;

  ~Jit();

 private:
  friend struct CompiledModule;
  Jit();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tessel::codegen
