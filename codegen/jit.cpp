#include "codegen/jit.hpp"

#include "codegen/host.hpp"

#include <cstdlib>
#include <mutex>
#include <unordered_map>

#include "codegen/llvm_headers.hpp"
#include "tracer/errors.hpp"

namespace tessel::codegen {

struct Jit::Impl {
  std::unique_ptr<llvm::orc::LLJIT> jit;
  std::unique_ptr<llvm::TargetMachine> tm;
  std::mutex mutex;
  std::unordered_map<std::string, void*> cache;
  int modules = 0;
};

namespace {

std::string to_string(llvm::Error e) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << e;
  return os.str();
}

template <class T>
T unwrap(llvm::Expected<T> v, const char* what) {
  if (!v) throw InternalError(std::string(what) + ": " + to_string(v.takeError()));
  return std::move(*v);
}

}  // namespace

Jit::Jit() : impl_(std::make_unique<Impl>()) {
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  auto jtmb = unwrap(llvm::orc::JITTargetMachineBuilder::detectHost(), "detecting the host CPU");
  jtmb.setCodeGenOptLevel(llvm::CodeGenOptLevel::Aggressive);
  if (avx512_disabled()) jtmb.addFeatures({"-avx512f"});
  // Contract a * b + c into FMAs, as XLA:CPU does (JAX's bits depend on it).
  jtmb.getOptions().AllowFPOpFusion = llvm::FPOpFusion::Fast;
  impl_->tm = unwrap(jtmb.createTargetMachine(), "creating the target machine");
  impl_->jit = unwrap(llvm::orc::LLJITBuilder().setJITTargetMachineBuilder(std::move(jtmb)).create(), "creating the JIT");
  // Kernels may call libm (float64 transcendentals, pow, atan2).
  auto& dylib = impl_->jit->getMainJITDylib();
  dylib.addGenerator(unwrap(llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(
                                impl_->jit->getDataLayout().getGlobalPrefix()),
                            "opening the process's symbols"));
}

Jit::~Jit() = default;

Jit& Jit::get() {
  static Jit jit;
  return jit;
}

const llvm::TargetMachine& Jit::target_machine() const { return *impl_->tm; }

std::unique_ptr<llvm::Module> Jit::new_module(const std::string& name, llvm::LLVMContext& context) {
  auto m = std::make_unique<llvm::Module>(name, context);
  m->setTargetTriple(impl_->tm->getTargetTriple().str());
  m->setDataLayout(impl_->jit->getDataLayout());
  return m;
}

std::vector<void*> Jit::compile(std::unique_ptr<llvm::Module> module, std::unique_ptr<llvm::LLVMContext> context,
                                const std::vector<std::string>& symbols) {
  std::lock_guard<std::mutex> lk(impl_->mutex);
  {
    std::string err;
    llvm::raw_string_ostream os(err);
    if (llvm::verifyModule(*module, &os)) throw InternalError("generated IR does not verify: " + os.str());
  }
  // O3 with the host's target machine: loop and SLP vectorisation included.
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PipelineTuningOptions pto;
  pto.LoopVectorization = true;
  pto.SLPVectorization = true;
  llvm::PassBuilder pb(impl_->tm.get(), pto);
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  llvm::ModulePassManager mpm = pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3);
  mpm.run(*module, mam);
  // Debug dumps: the optimised IR of every kernel module.
  if (const char* dir = std::getenv("TESSEL_DUMP_DIR")) {
    std::error_code ec;
    llvm::raw_fd_ostream os(std::string(dir) + "/" + module->getName().str() + ".ll", ec);
    if (!ec) module->print(os, nullptr);
  }

  auto rt = impl_->jit->getMainJITDylib().createResourceTracker();
  if (auto e = impl_->jit->addIRModule(rt, llvm::orc::ThreadSafeModule(std::move(module), std::move(context))))
    throw InternalError("adding a module to the JIT: " + to_string(std::move(e)));
  std::vector<void*> out;
  for (auto& s : symbols) {
    auto addr = unwrap(impl_->jit->lookup(s), "looking up a kernel");
    out.push_back(addr.toPtr<void*>());
  }
  ++impl_->modules;
  return out;
}

void* Jit::cached(const std::string& key, const std::function<void*()>& make) {
  {
    std::lock_guard<std::mutex> lk(impl_->mutex);
    auto it = impl_->cache.find(key);
    if (it != impl_->cache.end()) return it->second;
  }
  void* f = make();
  std::lock_guard<std::mutex> lk(impl_->mutex);
  return impl_->cache.emplace(key, f).first->second;
}

std::size_t Jit::cache_size() const {
  std::lock_guard<std::mutex> lk(impl_->mutex);
  return impl_->cache.size();
}

}  // namespace tessel::codegen
