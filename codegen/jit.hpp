// The ORC JIT: one LLJIT for the process, targeting the host CPU (its own
// features: AVX2, AVX-512 where present), optimising every module at O3 with
// loop and SLP vectorisation before it is compiled. Kernels are cached by a
// hash of their IR description (STYLE.md 12).
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

class Jit {
 public:
  static Jit& get();

  // Optimises and compiles `module`, returning the addresses of `symbols`.
  std::vector<void*> compile(std::unique_ptr<llvm::Module> module, std::unique_ptr<llvm::LLVMContext> context,
                             const std::vector<std::string>& symbols);
  // A fresh module set up for the host (triple, data layout).
  std::unique_ptr<llvm::Module> new_module(const std::string& name, llvm::LLVMContext& context);
  // The host target machine (its CPU and features).
  const llvm::TargetMachine& target_machine() const;

  // Kernel cache: the kernel compiled for `key`, built by `make` on a miss.
  void* cached(const std::string& key, const std::function<void*()>& make);
  std::size_t cache_size() const;

  ~Jit();

 private:
  Jit();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tessel::codegen
