#include "codegen/jit.hpp"

#include "codegen/host.hpp"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <unordered_map>

#include "codegen/llvm_headers.hpp"
#include "tessel/core/errors.hpp"

namespace tessel::codegen {

struct Jit::Impl {
  std::unique_ptr<llvm::orc::LLJIT> jit;
  std::unique_ptr<llvm::TargetMachine> tm;
  std::mutex mutex;
  std::unordered_map<std::string, std::weak_ptr<const CompiledModule>> cache;
  std::atomic<std::size_t> live{0};  // CompiledModules alive
  std::size_t object_bytes = 0;  // bytes of all object files the JIT linked
  std::size_t sweep_at = 64;     // cache size at which expired entries are dropped
};

struct CompiledModule::Impl {
  Jit::Impl* jit = nullptr;
  llvm::orc::ResourceTrackerSP tracker;
};

CompiledModule::~CompiledModule() {
  if (!impl || !impl->tracker) return;
  --impl->jit->live;
  // Nothing can call into the module now: its last holder is gone. ORC's
  // removal takes the session's own lock; not holding ours, a device thread
  // that drops the last executable does not wait for an unrelated compile.
  if (auto e = impl->tracker->remove()) llvm::consumeError(std::move(e));
}

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
  // Measure each object file (a module's code size, for the compile cache's bound).
  Impl* self = impl_.get();
  impl_->jit->getObjTransformLayer().setTransform(
      [self](std::unique_ptr<llvm::MemoryBuffer> obj) -> llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>> {
        self->object_bytes += obj->getBufferSize();
        return std::move(obj);
      });
  // Kernels may call libm (float64 transcendentals, pow, atan2).
  auto& dylib = impl_->jit->getMainJITDylib();
  dylib.addGenerator(unwrap(llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(
                                impl_->jit->getDataLayout().getGlobalPrefix()),
                            "opening the process's symbols"));
}

Jit::~Jit() = default;

Jit& Jit::get() {
  // Never destroyed: modules held by caches that outlive main free into it.
  static Jit* jit = new Jit;
  return *jit;
}

const llvm::TargetMachine& Jit::target_machine() const { return *impl_->tm; }

std::unique_ptr<llvm::Module> Jit::new_module(const std::string& name, llvm::LLVMContext& context) {
  auto m = std::make_unique<llvm::Module>(name, context);
  m->setTargetTriple(impl_->tm->getTargetTriple().str());
  m->setDataLayout(impl_->jit->getDataLayout());
  return m;
}

ModuleRef Jit::compile(std::unique_ptr<llvm::Module> module, std::unique_ptr<llvm::LLVMContext> context,
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
  // Owned before the lookups: a failed one removes the module again.
  auto out = std::make_shared<CompiledModule>();
  out->impl = std::make_unique<CompiledModule::Impl>();
  out->impl->jit = impl_.get();
  out->impl->tracker = rt;
  ++impl_->live;
  const std::size_t before = impl_->object_bytes;
  for (auto& s : symbols) {
    auto addr = unwrap(impl_->jit->lookup(s), "looking up a kernel");
    out->symbols.push_back(addr.toPtr<void*>());
  }
  out->code_bytes = impl_->object_bytes - before;
  return out;
}

ModuleRef Jit::cached(const std::string& key, const std::function<ModuleRef()>& make) {
  {
    std::lock_guard<std::mutex> lk(impl_->mutex);
    auto it = impl_->cache.find(key);
    if (it != impl_->cache.end())
      if (auto m = it->second.lock()) return m;
  }
  ModuleRef m = make();
  std::lock_guard<std::mutex> lk(impl_->mutex);
  auto& slot = impl_->cache[key];
  if (auto other = slot.lock()) return other;  // another thread built it meanwhile
  slot = m;
  // Drop the entries of modules that are gone (amortised: when the table doubles).
  if (impl_->cache.size() >= impl_->sweep_at) {
    std::erase_if(impl_->cache, [](const auto& kv) { return kv.second.expired(); });
    impl_->sweep_at = std::max<std::size_t>(64, 2 * impl_->cache.size());
  }
  return m;
}

std::size_t Jit::cache_size() const {
  std::lock_guard<std::mutex> lk(impl_->mutex);
  std::size_t n = 0;
  for (auto& [k, w] : impl_->cache) n += !w.expired();
  return n;
}

std::size_t Jit::live_modules() const { return impl_->live.load(); }

}  // namespace tessel::codegen
