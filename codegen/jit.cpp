#include "codegen/jit.hpp"

#include "codegen/host.hpp"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>
#include <unordered_map>

#include "codegen/llvm_headers.hpp"
#include "runtime/trace.hpp"
#include "tessel/core/errors.hpp"

namespace tessel::codegen {

namespace {
thread_local JitThreadStats t_stats;
}

struct Jit::Impl {
  std::unique_ptr<llvm::orc::LLJIT> jit;
  std::unique_ptr<llvm::TargetMachine> tm;
  std::mutex mutex;
  std::unordered_map<std::string, std::weak_ptr<const CompiledModule>> cache;
  std::atomic<std::size_t> live{0};  // CompiledModules alive
  std::size_t sweep_at = 64;         // cache size at which expired entries are dropped
  std::size_t dylibs = 0;            // JITDylibs made (their names)
  std::string disk_dir;              // the disk cache (empty: none)
  std::optional<std::string> host_id;  // what a disk entry must have been made for (empty: no disk cache)

  // Links an object file into a JITDylib of its own (its symbols' names
  // never meet another module's) and looks up its symbols. Called with the lock.
  ModuleRef link(std::unique_ptr<llvm::MemoryBuffer> object, const std::vector<std::string>& symbols);
};

struct CompiledModule::Impl {
  Jit::Impl* jit = nullptr;
  llvm::orc::JITDylib* dylib = nullptr;
};

CompiledModule::~CompiledModule() {
  if (!impl || !impl->dylib) return;
  --impl->jit->live;
  // Nothing can call into the module now: its last holder is gone. ORC's
  // removal takes the session's own lock; not holding ours, a device thread
  // that drops the last executable does not wait for an unrelated compile.
  if (auto e = impl->jit->jit->getExecutionSession().removeJITDylib(*impl->dylib)) llvm::consumeError(std::move(e));
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

// FNV-1a, 64 bits: file names and checksums of disk entries (an entry is
// used only when its key's bytes match exactly; the checksum finds damage).
constexpr std::uint64_t kFnvBasis = 1469598103934665603ull;
std::uint64_t fnv1a(const char* p, std::size_t n, std::uint64_t h = kFnvBasis) {
  for (std::size_t i = 0; i < n; ++i) h = (h ^ std::uint8_t(p[i])) * 1099511628211ull;
  return h;
}

std::string hex(std::uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

// The GNU build-id of the loaded image holding this code, read from its
// notes in memory (what runs, not what is on disk now), or empty.
std::string loaded_build_id() {
  struct Search {
    std::uintptr_t addr;
    std::string id;
  } search{reinterpret_cast<std::uintptr_t>(&loaded_build_id), {}};
  dl_iterate_phdr(
      [](dl_phdr_info* info, std::size_t, void* data) -> int {
        auto& s = *static_cast<Search*>(data);
        bool mine = false;
        for (int i = 0; i < info->dlpi_phnum && !mine; ++i) {
          const auto& ph = info->dlpi_phdr[i];
          const std::uintptr_t lo = info->dlpi_addr + ph.p_vaddr;
          mine = ph.p_type == PT_LOAD && s.addr >= lo && s.addr < lo + ph.p_memsz;
        }
        if (!mine) return 0;
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          const auto& ph = info->dlpi_phdr[i];
          if (ph.p_type != PT_NOTE) continue;
          const char* p = reinterpret_cast<const char*>(info->dlpi_addr + ph.p_vaddr);
          const char* end = p + ph.p_memsz;
          while (p + sizeof(ElfW(Nhdr)) <= end) {
            const auto* nh = reinterpret_cast<const ElfW(Nhdr)*>(p);
            const char* name = p + sizeof(ElfW(Nhdr));
            const char* desc = name + ((nh->n_namesz + 3) & ~3u);
            if (desc + nh->n_descsz > end) break;
            if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 && std::memcmp(name, "GNU", 4) == 0) {
              static const char* digits = "0123456789abcdef";
              for (std::uint32_t k = 0; k < nh->n_descsz; ++k) {
                const auto b = static_cast<unsigned char>(desc[k]);
                s.id += digits[b >> 4];
                s.id += digits[b & 15];
              }
              return 1;
            }
            p = desc + ((nh->n_descsz + 3) & ~3u);
          }
        }
        return 1;
      },
      &search);
  return search.id;
}

// This build of tessel (the same kernel key may compile to different code
// in another build): the loaded image's build-id, else a hash of its file.
std::string build_identity() {
  if (std::string id = loaded_build_id(); !id.empty()) return "build-id " + id;
  Dl_info info{};
  if (!dladdr(reinterpret_cast<void*>(&build_identity), &info) || !info.dli_fname) return {};
  std::ifstream f(info.dli_fname, std::ios::binary);
  if (!f) return {};
  std::uint64_t h = kFnvBasis;
  std::vector<char> buf(1 << 20);
  std::size_t total = 0;
  while (f) {
    f.read(buf.data(), std::streamsize(buf.size()));
    const std::size_t n = std::size_t(f.gcount());
    h = fnv1a(buf.data(), n, h);
    total += n;
  }
  return hex(h) + ":" + std::to_string(total);
}

// Disk entry: "TESSELK1", then length-prefixed host id, key, symbols and
// object file, then the FNV-1a checksum of everything before it.
constexpr char kMagic[8] = {'T', 'E', 'S', 'S', 'E', 'L', 'K', '1'};

void put_u64(std::string& out, std::uint64_t v) { out.append(reinterpret_cast<const char*>(&v), 8); }
void put_bytes(std::string& out, const std::string& s) {
  put_u64(out, s.size());
  out += s;
}

struct Reader {
  const std::string& s;
  std::size_t at = 0;
  bool ok = true;
  std::uint64_t u64() {
    if (!ok || s.size() - at < 8) return ok = false, 0;
    std::uint64_t v;
    std::memcpy(&v, s.data() + at, 8);
    at += 8;
    return v;
  }
  std::string bytes() {
    const std::uint64_t n = u64();
    if (!ok || s.size() - at < n) return ok = false, std::string();
    std::string out = s.substr(at, n);
    at += n;
    return out;
  }
};

struct DiskEntry {
  std::vector<std::string> symbols;
  std::string object;
};

std::string entry_path(const std::string& dir, const std::string& host_id, const std::string& key) {
  return dir + "/" + hex(fnv1a(key.data(), key.size(), fnv1a(host_id.data(), host_id.size()))) + ".tko";
}

// The entry for exactly (host_id, key), or nothing: a missing, unreadable,
// damaged or foreign file is never used.
std::optional<DiskEntry> load_entry(const std::string& path, const std::string& host_id, const std::string& key,
                                    bool& rejected) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) return std::nullopt;  // not there
  rejected = true;
  if (size < sizeof kMagic + 8 || size > (std::uintmax_t(1) << 30)) return std::nullopt;
  std::ifstream f(path, std::ios::binary);
  std::string s(size, '\0');
  if (!f.read(s.data(), std::streamsize(size))) return std::nullopt;
  std::uint64_t sum;
  std::memcpy(&sum, s.data() + s.size() - 8, 8);
  if (sum != fnv1a(s.data(), s.size() - 8) || std::memcmp(s.data(), kMagic, sizeof kMagic) != 0) return std::nullopt;
  const std::string body = s.substr(sizeof kMagic, s.size() - 8 - sizeof kMagic);
  Reader r{body};
  if (r.bytes() != host_id || !r.ok) return std::nullopt;
  if (r.bytes() != key || !r.ok) return std::nullopt;
  DiskEntry e;
  const std::uint64_t nsym = r.u64();
  if (!r.ok || nsym == 0 || nsym > 1024) return std::nullopt;
  for (std::uint64_t i = 0; i < nsym && r.ok; ++i) e.symbols.push_back(r.bytes());
  e.object = r.bytes();
  if (!r.ok || r.at != body.size() || e.object.empty()) return std::nullopt;
  rejected = false;
  return e;
}

// Written to a temporary file and renamed: readers see a whole entry or none.
bool store_entry(const std::string& dir, const std::string& path, const std::string& host_id, const std::string& key,
                 const std::vector<std::string>& symbols, const llvm::MemoryBuffer& object) {
  std::string s(kMagic, sizeof kMagic);
  put_bytes(s, host_id);
  put_bytes(s, key);
  put_u64(s, symbols.size());
  for (auto& sym : symbols) put_bytes(s, sym);
  put_bytes(s, std::string(object.getBufferStart(), object.getBufferSize()));
  put_u64(s, fnv1a(s.data(), s.size()));
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  std::ostringstream tmp;
  tmp << path << ".tmp." << getpid() << "." << std::this_thread::get_id();
  {
    std::ofstream f(tmp.str(), std::ios::binary | std::ios::trunc);
    if (!f.write(s.data(), std::streamsize(s.size()))) return std::filesystem::remove(tmp.str(), ec), false;
  }
  std::filesystem::rename(tmp.str(), path, ec);
  if (ec) std::filesystem::remove(tmp.str(), ec);
  return !ec;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
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
  // The code model LLJIT gives JITLink (x86-64 ELF): tessel makes the object
  // files itself, with this target machine.
  jtmb.setRelocationModel(llvm::Reloc::PIC_);
  jtmb.setCodeModel(llvm::CodeModel::Small);
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

namespace {

// The vector stores of a kStreamAttr function through its output pointer,
// aligned to their size, become non-temporal (jit.hpp).
void mark_streaming_stores(llvm::Module& module) {
  for (llvm::Function& f : module) {
    if (!f.hasFnAttribute(kStreamAttr)) continue;
    auto is_output = [&](const llvm::Value* base) {
      if (auto* a = llvm::dyn_cast<llvm::Argument>(base))
        return a->getArgNo() == 0 && a->getParamAlign().valueOrOne().value() >= kStreamAlign;
      if (auto* l = llvm::dyn_cast<llvm::LoadInst>(base)) return l->getMetadata(kStreamAttr) != nullptr;
      return false;
    };
    for (llvm::BasicBlock& bb : f)
      for (llvm::Instruction& i : bb) {
        auto* st = llvm::dyn_cast<llvm::StoreInst>(&i);
        if (!st || !st->getValueOperand()->getType()->isVectorTy()) continue;
        const std::uint64_t size = module.getDataLayout().getTypeStoreSize(st->getValueOperand()->getType());
        if (size < 16 || st->getAlign().value() < size || !is_output(llvm::getUnderlyingObject(st->getPointerOperand())))
          continue;
        st->setMetadata(llvm::LLVMContext::MD_nontemporal,
                        llvm::MDNode::get(module.getContext(), llvm::ConstantAsMetadata::get(
                                                                   llvm::ConstantInt::get(llvm::Type::getInt32Ty(module.getContext()), 1))));
      }
  }
}

// O3 with the host's target machine (loop and SLP vectorisation included),
// then code generation: the module's object file.
std::unique_ptr<llvm::MemoryBuffer> compile_to_object(llvm::TargetMachine& tm, llvm::Module& module) {
  {
    std::string err;
    llvm::raw_string_ostream os(err);
    if (llvm::verifyModule(module, &os)) throw InternalError("generated IR does not verify: " + os.str());
  }
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PipelineTuningOptions pto;
  pto.LoopVectorization = true;
  pto.SLPVectorization = true;
  llvm::PassBuilder pb(&tm, pto);
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  llvm::ModulePassManager mpm = pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3);
  mpm.run(module, mam);
  mark_streaming_stores(module);
  // Debug dumps: the optimised IR of every kernel module.
  if (const char* dir = std::getenv("TESSEL_DUMP_DIR")) {
    std::error_code ec;
    llvm::raw_fd_ostream os(std::string(dir) + "/" + module.getName().str() + ".ll", ec);
    if (!ec) module.print(os, nullptr);
  }
  return unwrap(llvm::orc::SimpleCompiler(tm)(module), "generating machine code");
}

}  // namespace

ModuleRef Jit::Impl::link(std::unique_ptr<llvm::MemoryBuffer> object, const std::vector<std::string>& symbols) {
  // Bare: its symbols resolve through the main JITDylib (the process's, libm).
  llvm::orc::JITDylib& jd = jit->getExecutionSession().createBareJITDylib("tessel_module_" + std::to_string(dylibs++));
  jd.addToLinkOrder(jit->getMainJITDylib());
  // Owned before the link: a failed one removes the dylib again.
  auto out = std::make_shared<CompiledModule>();
  out->impl = std::make_unique<CompiledModule::Impl>();
  out->impl->jit = this;
  out->impl->dylib = &jd;
  ++live;
  out->code_bytes = object->getBufferSize();
  if (auto e = jit->addObjectFile(jd, std::move(object)))
    throw InternalError("adding an object file to the JIT: " + to_string(std::move(e)));
  for (auto& s : symbols) {
    auto addr = unwrap(jit->lookup(jd, s), "looking up a kernel");
    out->symbols.push_back(addr.toPtr<void*>());
  }
  return out;
}

void Jit::set_disk_cache(const std::string& dir) {
  std::lock_guard<std::mutex> lk(impl_->mutex);
  impl_->disk_dir = dir;
}

ModuleRef Jit::cached(const std::string& key, const std::function<ModuleSource()>& make) {
  std::string dir;
  {
    std::lock_guard<std::mutex> lk(impl_->mutex);
    auto it = impl_->cache.find(key);
    if (it != impl_->cache.end())
      if (auto m = it->second.lock()) return m;
    dir = impl_->disk_dir;
    if (!dir.empty() && !impl_->host_id) {
      // What an entry must have been made for: this build of tessel, LLVM,
      // the target CPU and features the JIT compiles for.
      const std::string build = build_identity();
      impl_->host_id = build.empty() ? std::string()
                                     : "tessel-jit-1;llvm " LLVM_VERSION_STRING ";" +
                                           impl_->tm->getTargetTriple().str() + ";" + impl_->tm->getTargetCPU().str() +
                                           ";" + impl_->tm->getTargetFeatureString().str() + ";build " + build;
    }
    if (!dir.empty() && impl_->host_id->empty()) dir.clear();  // this build cannot be identified: no disk cache
  }
  const std::string host_id = dir.empty() ? std::string() : *impl_->host_id;
  const double trace_t0 = rt::trace::on() ? rt::trace::now_us() : -1;
  ModuleRef m;
  std::string how;
  const std::string path = dir.empty() ? std::string() : entry_path(dir, host_id, key);
  if (!dir.empty()) {
    bool rejected = false;
    if (auto e = load_entry(path, host_id, key, rejected)) {
      std::lock_guard<std::mutex> lk(impl_->mutex);
      try {
        m = impl_->link(llvm::MemoryBuffer::getMemBufferCopy(e->object, "tessel-disk-cache"), e->symbols);
        ++t_stats.disk_hits;
        how = "kernel from disk cache";
      } catch (const InternalError&) {
        rejected = true;  // an entry that does not link: compiled again, and rewritten below
        m = nullptr;
      }
    }
    t_stats.disk_rejected += rejected;
  }
  if (!m) {
    ModuleSource src = make();
    std::unique_ptr<llvm::MemoryBuffer> object;
    {
      std::lock_guard<std::mutex> lk(impl_->mutex);  // the target machine is the JIT's
      const auto t0 = std::chrono::steady_clock::now();
      object = compile_to_object(*impl_->tm, *src.module);
      t_stats.llvm_seconds += seconds_since(t0);
      ++t_stats.llvm_compiles;
    }
    // The disk written outside the lock: other threads' compiles do not wait for it.
    if (!dir.empty() && store_entry(dir, path, host_id, key, src.symbols, *object)) ++t_stats.disk_stores;
    std::lock_guard<std::mutex> lk(impl_->mutex);
    m = impl_->link(std::move(object), src.symbols);
    how = "llvm kernel";
  }
  if (trace_t0 >= 0) rt::trace::complete(rt::trace::kCompileTrack, how, "llvm", trace_t0, rt::trace::now_us());
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

JitThreadStats Jit::thread_stats() { return t_stats; }

}  // namespace tessel::codegen
