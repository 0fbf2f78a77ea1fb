#include "dsl/src/pipeline.hpp"

#include <atomic>
#include <iostream>
#include <filesystem>
#include <fstream>
#include <list>
#include <mutex>
#include <sstream>
#include <unordered_map>

#include <tessel/device.hpp>

#include "codegen/compile.hpp"
#include "codegen/jit.hpp"
#include "dsl/src/array_impl.hpp"
#include "dsl/src/sharding_impl.hpp"
#include "runtime/device.hpp"
#include "runtime/trace.hpp"
#include "runtime/transfer.hpp"
#include "tracer/build.hpp"
#include "tessel/core/errors.hpp"
#include "tracer/rewrite.hpp"

namespace tessel::detail {

namespace {

// The compile cache: programs by exact key (tessel/core/key.hpp), least recently
// used first out when config()'s bounds are exceeded. A program leaves the
// cache; Compiled objects that hold it keep it alive, and its machine code
// goes when the last of them does.
class ProgramCache {
 public:
  std::shared_ptr<Program> find(const Key& k, bool need_executable) {
    std::lock_guard<std::mutex> lk(m_);
    auto it = index_.find(k);
    if (it == index_.end()) return nullptr;
    if (need_executable && !it->second->program->executable) return nullptr;
    lru_.splice(lru_.begin(), lru_, it->second);  // most recent first
    return it->second->program;
  }
  void insert(Key k, std::shared_ptr<Program> p, std::size_t bytes) {
    std::vector<std::shared_ptr<Program>> evicted;  // destroyed after the lock is released
    std::lock_guard<std::mutex> lk(m_);
    auto it = index_.find(k);
    if (it != index_.end()) {
      bytes_ -= it->second->bytes;
      evicted.push_back(std::move(it->second->program));
      lru_.erase(it->second);
      index_.erase(it);
    }
    lru_.push_front({k, std::move(p), bytes});
    index_.emplace(std::move(k), lru_.begin());
    bytes_ += bytes;
    const Config& c = config();
    while (lru_.size() > 1 && (lru_.size() > c.compile_cache_max_entries || bytes_ > c.compile_cache_max_bytes)) {
      bytes_ -= lru_.back().bytes;
      evicted.push_back(std::move(lru_.back().program));
      index_.erase(lru_.back().key);
      lru_.pop_back();
    }
  }
  CacheStats stats() {
    std::lock_guard<std::mutex> lk(m_);
    return {lru_.size(), bytes_};
  }

 private:
  struct Entry {
    Key key;
    std::shared_ptr<Program> program;
    std::size_t bytes = 0;
  };
  std::mutex m_;
  std::list<Entry> lru_;
  std::unordered_map<Key, std::list<Entry>::iterator, Key::Hash> index_;
  std::size_t bytes_ = 0;
};

ProgramCache& program_cache() {
  static ProgramCache* c = new ProgramCache;  // outlives every static that may compile at exit
  return *c;
}

std::atomic<std::size_t> g_compiles{0};
std::atomic<int> g_dump_counter{0};


std::string arg_name(const LowerOptions& opt, size_t i) {
  return opt.is_op ? "x" + std::to_string(i + 1) + " of " + opt.name : std::to_string(i) + " of jit(" + opt.name + ")";
}

// The device order committed arguments and given shardings agree on.
std::vector<int> device_assignment(const Graph& g, const std::vector<Array>& args, const LowerOptions& opt) {
  std::optional<std::vector<int>> ids;
  size_t first = 0;
  for (size_t i = 0; i < args.size(); ++i) {
    const ArrayImpl& a = concrete(args[i]);
    if (!a.committed) continue;
    const auto& mine = a.layout.mesh->device_ids();
    if (!ids) {
      ids = mine;
      first = i;
    } else if (*ids != mine) {
      const ArrayImpl& f = concrete(args[first]);
      throw DeviceMismatchError("Received incompatible devices for jitted computation. Got argument " +
                                arg_name(opt, first) + " with shape " + aval_str(f.dtype, f.shape) +
                                " and device ids " + ids_str(*ids) + " on platform cpu and argument " +
                                arg_name(opt, i) + " with shape " + aval_str(a.dtype, a.shape) + " and device ids " +
                                ids_str(mine) + " on platform cpu");
    }
  }
  auto check = [&](const std::vector<int>& mine, const std::string& what) {
    if (!ids) ids = mine;
    else if (*ids != mine)
      throw DeviceMismatchError("Received incompatible devices for jitted computation: " + what + " uses device ids " +
                                ids_str(mine) + " but the computation runs on device ids " + ids_str(*ids));
  };
  for (auto& n : g.topo_order())
    if (n->op == Op::sharding_constraint) check(n->attr<attr::Constraint>().sharding->mesh->device_ids(), "with_sharding_constraint");
    else if (n->op == Op::shard_map) check(n->attr<attr::ShardMap>().mesh->device_ids(), "shard_map");
  for (auto& s : opt.in_shardings)
    if (s) check(device_ids(sharding_devices(*s)), "in_shardings " + s->str());
  for (auto& s : opt.out_shardings)
    if (s) check(device_ids(sharding_devices(*s)), "out_shardings " + s->str());
  if (ids) return *ids;
  // Nothing committed: where the first (uncommitted) argument is, else the default device.
  if (!args.empty()) return concrete(args[0]).layout.mesh->device_ids();
  return {0};
}


// The axes of the common mesh that axes `axes` of `mesh` (one of cm's
// sources) became.
std::vector<int> common_axes(const CommonMesh& cm, const MeshRef& mesh, const std::vector<int>& axes) {
  for (size_t s = 0; s < cm.sources.size(); ++s) {
    if (!(cm.sources[s] == mesh || *cm.sources[s] == *mesh)) continue;
    std::vector<int> out;
    for (int a : axes) out.insert(out.end(), cm.atoms_of[s][a].begin(), cm.atoms_of[s][a].end());
    return out;
  }
  throw ShardingError("shard_map over " + mesh->str() + " inside a computation over " + cm.mesh->str() +
                      ": their devices differ");
}

// Rebuilds g in a fresh table with constraints moved onto the common mesh
// (shard_maps and the collectives of their bodies too) and out_shardings
// added as constraints on the outputs.
Graph rewrite_for_mesh(const Graph& g, const CommonMesh& cm, const std::vector<std::optional<AxisSharding>>& outs) {
  NodeTable t;
  Graph r;
  r.name = g.name;
  for (auto& p : g.params) r.params.push_back(build::with_operands(t, *p, {}));
  auto m = rewrite(g, t, r.params, [&](const Node& n, const std::vector<NodeRef>& in) -> NodeRef {
    switch (n.op) {
      case Op::sharding_constraint:
        return build::sharding_constraint(t, in[0], cm.rewrite(*n.attr<attr::Constraint>().sharding));
      case Op::shard_map: {
        attr::ShardMap sm = n.attr<attr::ShardMap>();  // its body is rewritten already
        sm.manual = common_axes(cm, sm.mesh, sm.manual);
        for (auto& s : sm.in_specs) s = cm.rewrite(s);
        for (auto& s : sm.out_specs) s = cm.rewrite(s);
        sm.mesh = cm.mesh;
        return build::shard_map(t, std::move(sm), in);
      }
      case Op::axis_index: {
        const auto& a = n.attr<attr::AxisIndex>();
        return build::axis_index(t, cm.mesh, common_axes(cm, a.mesh, a.axes));
      }
      case Op::pvary: {
        const auto& a = n.attr<attr::AxisIndex>();
        return build::pvary(t, in[0], cm.mesh, common_axes(cm, a.mesh, a.axes));
      }
      case Op::all_reduce: {
        const auto& a = n.attr<attr::AllReduce>();
        return build::all_reduce(t, in[0], cm.mesh, common_axes(cm, a.mesh, a.axes), a.reduce_op);
      }
      case Op::all_gather: {
        const auto& a = n.attr<attr::AllGather>();
        return build::all_gather(t, in[0], cm.mesh, common_axes(cm, a.mesh, a.axes), a.dimension);
      }
      case Op::reduce_scatter: {
        const auto& a = n.attr<attr::ReduceScatter>();
        return build::reduce_scatter(t, in[0], cm.mesh, common_axes(cm, a.mesh, a.axes), a.dimension, a.reduce_op);
      }
      case Op::all_to_all: {
        const auto& a = n.attr<attr::AllToAll>();
        return build::all_to_all(t, in[0], cm.mesh, common_axes(cm, a.mesh, a.axes), a.split_dimension,
                                 a.concat_dimension);
      }
      case Op::collective_permute:  // positions in the whole mesh: the same on the common one
        return build::collective_permute(t, in[0], cm.mesh, n.attr<attr::CollectivePermute>().pairs);
      default: return build::with_operands(t, n, in);
    }
  });
  for (size_t i = 0; i < g.outputs.size(); ++i) {
    NodeRef o = m.at(g.outputs[i].get());
    if (i < outs.size() && outs[i]) o = build::sharding_constraint(t, o, *outs[i]);
    r.outputs.push_back(o);
  }
  for (auto& e : g.effects) r.effects.push_back(m.at(e.get()));
  return r;
}

// What each node costs comes from its op's rule (Rule<op>::cost); a region
// op adds what its regions run, as often as they run (a cond: the dearest).
CostAnalysis cost_of(const Graph& local) {
  CostAnalysis c;
  for (auto& n : local.topo_order()) {
    const NodeCost own = rules(n->op).cost(*n);
    c.flops += own.flops, c.transcendentals += own.transcendentals, c.bytes_accessed += own.bytes_accessed;
    CostAnalysis inner;
    for (auto& g : n->regions()) {
      const CostAnalysis r = cost_of(*g);
      if (own.one_region) {
        inner.flops = std::max(inner.flops, r.flops);
        inner.transcendentals = std::max(inner.transcendentals, r.transcendentals);
        inner.bytes_accessed = std::max(inner.bytes_accessed, r.bytes_accessed);
      } else {
        inner.flops += r.flops, inner.transcendentals += r.transcendentals, inner.bytes_accessed += r.bytes_accessed;
      }
    }
    c.flops += own.region_runs * inner.flops;
    c.transcendentals += own.region_runs * inner.transcendentals;
    c.bytes_accessed += own.region_runs * inner.bytes_accessed;
  }
  return c;
}

// The nodes that meet peers, with the bytes each device reads (the op's
// cost rule); a region op's as often as its regions run.
std::vector<CommStat> communication_of(const Graph& local) {
  std::vector<CommStat> out;
  for (auto& n : local.topo_order()) {
    const NodeCost own = rules(n->op).cost(*n);
    if (own.communicates) out.push_back({op_name(n->op), own.bytes_moved});
    if (n->regions().empty()) continue;
    std::vector<CommStat> inner;
    double most = -1;
    for (auto& g : n->regions()) {
      std::vector<CommStat> r = communication_of(*g);
      if (!own.one_region) {
        inner.insert(inner.end(), r.begin(), r.end());
        continue;
      }
      double moved = 0;
      for (auto& s : r) moved += s.bytes_per_device;
      if (moved > most) most = moved, inner = std::move(r);
    }
    for (auto& s : inner) out.push_back({s.collective, s.bytes_per_device * own.region_runs});
  }
  return out;
}

Sharding user_sharding(const AxisSharding& s, const Shape& shape, const CommonMesh& cm, const std::vector<Array>& args,
                       const Graph& g, const LowerOptions& opt) {
  const auto& ids = s.mesh->device_ids();
  // The sharding of an argument that lays data out the same way.
  for (auto& a : args) {
    const ArrayImpl& ai = concrete(a);
    if (ai.committed && ai.shape.size() == shape.size() && same_placement(ai.layout, s, shape)) return *ai.sharding;
  }
  if (ids.size() == 1) return SingleDeviceSharding(Device(ids[0]));
  // A NamedSharding on a mesh the user gave.
  std::vector<Mesh> meshes;
  for (auto& a : args)
    if (concrete(a).committed && concrete(a).sharding->is_named()) meshes.push_back(concrete(a).sharding->as_named().mesh());
  for (auto& o : opt.in_shardings)
    if (o && o->is_named()) meshes.push_back(o->as_named().mesh());
  for (auto& o : opt.out_shardings)
    if (o && o->is_named()) meshes.push_back(o->as_named().mesh());
  for (auto& n : g.topo_order())
    if (n->op == Op::sharding_constraint) meshes.push_back(Mesh(n->attr<attr::Constraint>().sharding->mesh));
    else if (n->op == Op::shard_map) meshes.push_back(Mesh(n->attr<attr::ShardMap>().mesh));
  for (auto& m : meshes) {
    auto e = cm.express_on(s, m.impl());
    if (!e) continue;
    std::vector<PartitionSpec::Entry> entries;
    for (auto& d : e->dims) {
      std::vector<std::string> names;
      for (int a : d) names.push_back(m.impl()->axes()[a].name);
      entries.push_back(names.empty() ? PartitionSpec::Entry(None)
                                      : names.size() == 1 ? PartitionSpec::Entry(names[0]) : PartitionSpec::Entry::tuple(names));
    }
    while (!entries.empty() && entries.back().is_none()) entries.pop_back();
    return NamedSharding(m, PartitionSpec::from_entries(entries));
  }
  // Otherwise name the common mesh itself.
  std::vector<PartitionSpec::Entry> entries;
  for (auto& d : s.dims) {
    std::vector<std::string> names;
    for (int a : d) names.push_back(s.mesh->axes()[a].name);
    entries.push_back(names.empty() ? PartitionSpec::Entry(None) : PartitionSpec::Entry::tuple(names));
  }
  return NamedSharding(Mesh(s.mesh), PartitionSpec::from_entries(entries));
}

}  // namespace

namespace {

// The IR verifier between passes in debug builds (the sanitizer builds are
// debug builds): a pass that breaks an invariant is named at once.
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

// What each pass of lower() made: verified between passes (debug builds),
// timed (log_compiles, and an event on the trace's compile track) and,
// under config().dump_dir / TESSEL_DUMP_DIR, written as
// <n>.<program>.<k>-<pass>.txt, one file per pass in order. A pass's time
// runs from the previous pass's end.
class PassLog {
 public:
  explicit PassLog(std::string program)
      : program_(std::move(program)), dump_dir_(config().dump_dir), t_us_(rt::trace::now_us()) {}
  // A pass that made graph g (text: how to print it; to_text(g) by default).
  const Graph& after(const char* pass, const Graph& g, const std::string* text = nullptr) {
    timed(pass);
    verified(g, pass);
    if (!dump_dir_.empty()) texts_.emplace_back(pass, text ? *text : to_text(g));
    return g;
  }
  void record(const char* pass, const std::string& text) {
    timed(pass);
    if (!dump_dir_.empty()) texts_.emplace_back(pass, text);
  }
  // The pipeline's input, made by `pass` before lower() (not timed here).
  void given(const char* pass, const Graph& g) {
    verified(g, pass);
    if (!dump_dir_.empty()) texts_.emplace_back(pass, to_text(g));
  }
  // Each pass's name and seconds, in order.
  const std::vector<std::pair<std::string, double>>& times() const { return times_; }
  void dump(const std::string& program) const {
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

 private:
  void timed(const char* pass) {
    const double us = rt::trace::now_us();
    times_.emplace_back(pass, (us - t_us_) * 1e-6);
    if (rt::trace::on()) rt::trace::complete(rt::trace::kCompileTrack, std::string(pass) + " " + program_, "compile", t_us_, us);
    t_us_ = us;
  }
  std::string program_;
  std::string dump_dir_;
  double t_us_;  // the previous pass's end (the trace clock)
  std::vector<std::pair<std::string, double>> times_;
  std::vector<std::pair<std::string, std::string>> texts_;
};

}  // namespace

std::string ids_str(const std::vector<int>& ids) {
  std::ostringstream os;
  os << '[';
  for (size_t i = 0; i < ids.size(); ++i) os << (i ? ", " : "") << ids[i];
  os << ']';
  return os.str();
}

bool same_placement(const AxisSharding& a, const AxisSharding& b, const Shape& shape) {
  // The same sharding places every element alike (the common case: an
  // argument already laid out as the program wants it).
  if ((a.mesh == b.mesh || *a.mesh == *b.mesh) && a.dims == b.dims && a.unreduced == b.unreduced) return true;
  if (a.mesh->device_ids() != b.mesh->device_ids()) return false;
  if (a.tile_shape(shape) != b.tile_shape(shape)) return false;
  for (std::int64_t p = 0; p < a.mesh->size(); ++p)
    if (a.shard_box(shape, p) != b.shard_box(shape, p)) return false;
  return true;
}

std::size_t compile_count() { return g_compiles.load(); }
CacheStats compile_cache_stats() { return program_cache().stats(); }

namespace {

// What a compiled program depends on, exactly: the program's structure and
// bits, its name (messages), and how each argument is laid out, committed and
// sharded as the user sees it (output shardings are expressed in its terms).
Key program_key(const Graph& g, const std::vector<Array>& args, const LowerOptions& opt) {
  Key k = opt.graph_key ? *opt.graph_key : fingerprint(g);
  k.str(opt.name).pod(opt.is_op).pod(std::uint64_t(args.size()));
  for (auto& a : args) {
    const ArrayImpl& ai = concrete(a);
    k.pod(ai.committed);
    add_to_key(k, ai.layout);
    if (ai.committed) add_to_key(k, *ai.sharding);
  }
  auto shardings = [&](const std::vector<std::optional<Sharding>>& v) {
    k.pod(std::uint64_t(v.size()));
    for (auto& s : v) {
      k.pod(s.has_value());
      if (s) add_to_key(k, *s);
    }
  };
  shardings(opt.in_shardings);
  shardings(opt.out_shardings);
  return k;
}

// Whether a run costs less than waking its devices (rt::Executable::cheap):
// straight-line kernels and collectives of a few microseconds on all devices
// together, every thunk able to run for all devices on one thread.
bool is_cheap(const Program& p, const rt::Executable& e) {
  if (!p.global.effects.empty()) return false;
  for (auto& t : e.thunks) {
    const std::string c = t->category();
    if ((c != "kernel" && c != "dot" && c != "constant" && c != "collective") || !t->can_run_all()) return false;
  }
  double moved = 0;  // collectives' bytes per device
  for (auto& c : p.communication) moved += c.bytes_per_device;
  // Waking the devices costs tens of microseconds, and each collective
  // another rendezvous of every device thread: about what one thread reads
  // and writes of 256 KiB. Capped, so that no inline run keeps the caller
  // for more than a fraction of a millisecond.
  const double n = double(p.common.mesh->size());
  const double budget = std::min(256.0 * 1024 * double(1 + p.communication.size()), 4.0 * 1024 * 1024);
  return n * (p.cost.bytes_accessed + moved) <= budget && n * p.cost.flops <= 1e6 &&
         n * p.cost.transcendentals <= 1e5;
}

// What a cached program costs to keep: its texts and its kernels' code.
std::size_t program_bytes(const Program& p, std::size_t code_bytes) {
  return sizeof(Program) + p.global_text.size() + p.local_text.size() + p.thunks_text.size() + code_bytes +
         256 * std::size_t(p.partitioned.local.topo_order().size());
}

}  // namespace

namespace {

// How a program's arguments were laid out: for explaining a recompile.
struct CallSignature {
  std::vector<std::string> args;  // aval and sharding of each argument
  std::string program;            // the traced program's exact key
};

std::string arg_text(const Array& a) {
  const ArrayImpl& ai = concrete(a);
  return aval_str(ai.dtype, ai.shape) + (ai.committed ? " " + ai.sharding->str() : std::string(" (uncommitted)"));
}

// Why `name` compiles now: its first compile, or what differs from its
// previous one (jax_explain_cache_misses). One record per function name.
std::string compile_reason(const std::string& name, const CallSignature& now) {
  static std::mutex mu;
  static std::unordered_map<std::string, CallSignature> last;
  std::lock_guard<std::mutex> lk(mu);
  auto it = last.find(name);
  std::string why;
  if (it == last.end()) {
    why = "first compile";
  } else {
    const CallSignature& was = it->second;
    if (was.args.size() != now.args.size()) {
      why = "called with " + std::to_string(now.args.size()) + " array arguments, before with " +
            std::to_string(was.args.size());
    } else {
      for (size_t i = 0; i < now.args.size(); ++i)
        if (now.args[i] != was.args[i])
          why += (why.empty() ? "" : "; ") + std::string("argument ") + std::to_string(i) + " is " + now.args[i] +
                 ", was " + was.args[i];
      if (why.empty())
        why = was.program != now.program
                  ? "the same argument types and shardings but a different traced program (new static values, "
                    "closure constants or options)"
                  : "the same program and arguments, evicted from the compile cache or given new shardings";
    }
  }
  last[name] = now;
  return why;
}

void log_compile(const Graph& traced, const std::vector<Array>& args, const LowerOptions& opt,
                 const std::vector<std::pair<std::string, double>>& times, const codegen::JitThreadStats& before) {
  CallSignature sig;
  for (auto& a : args) sig.args.push_back(arg_text(a));
  sig.program = fingerprint(traced).bytes();
  const std::string why = compile_reason(opt.name, sig);
  const codegen::JitThreadStats after = codegen::Jit::thread_stats();
  double total = opt.trace_seconds;
  for (auto& [pass, s] : times) total += s;
  std::ostringstream os;
  os.setf(std::ios::fixed);
  os.precision(2);
  os << "tessel: compiled " << (opt.is_op ? opt.name : "jit(" + opt.name + ")") << " for (";
  for (size_t i = 0; i < sig.args.size(); ++i) os << (i ? ", " : "") << sig.args[i];
  os << ") in " << total * 1e3 << " ms because: " << why << ". Passes:";
  if (opt.trace_seconds > 0) os << " trace " << opt.trace_seconds * 1e3 << " ms,";
  for (size_t i = 0; i < times.size(); ++i) os << (i ? ", " : " ") << times[i].first << ' ' << times[i].second * 1e3 << " ms";
  os << " (LLVM: " << after.llvm_compiles - before.llvm_compiles << " kernel(s) in "
     << (after.llvm_seconds - before.llvm_seconds) * 1e3 << " ms";
  if (const std::size_t hits = after.disk_hits - before.disk_hits) os << ", " << hits << " from the disk cache";
  if (const std::size_t rej = after.disk_rejected - before.disk_rejected) os << ", " << rej << " disk entries rejected";
  os << ")\n";
  std::cerr << os.str() << std::flush;
}

}  // namespace

// A script of named passes: inline-calls, rewrite-for-mesh, propagate,
// partition, compile (each logged by PassLog above).
std::shared_ptr<const Program> lower(const Graph& traced, const std::vector<Array>& args, const LowerOptions& opt,
                                     bool compile) {
  Key key = program_key(traced, args, opt);
  if (auto hit = program_cache().find(key, compile)) return hit;

  auto p = std::make_shared<Program>();
  PassLog passes(opt.name);
  passes.given("trace", traced);
  // Calls become their bodies: every later pass sees plain primitives.
  Graph inlined;
  const bool calls = has_calls(traced);
  if (calls) inlined = inline_calls(traced);
  const Graph& g_in = calls ? passes.after("inline-calls", inlined) : traced;
  const std::vector<int> ids = device_assignment(g_in, args, opt);
  // Meshes: those of committed arguments, constraints and given shardings.
  std::vector<MeshRef> meshes;
  auto add_mesh = [&](const MeshRef& m) {
    for (auto& x : meshes)
      if (x == m || *x == *m) return;
    if (m->device_ids() == ids) meshes.push_back(m);
  };
  for (auto& a : args)
    if (concrete(a).committed) add_mesh(concrete(a).layout.mesh);
  for (auto& n : g_in.topo_order())
    if (n->op == Op::sharding_constraint) add_mesh(n->attr<attr::Constraint>().sharding->mesh);
    else if (n->op == Op::shard_map) add_mesh(n->attr<attr::ShardMap>().mesh);
  std::vector<std::optional<AxisSharding>> in_ax(g_in.params.size()), out_ax(g_in.outputs.size());
  for (size_t i = 0; i < opt.in_shardings.size() && i < in_ax.size(); ++i)
    if (opt.in_shardings[i]) {
      in_ax[i] = axis_sharding(*opt.in_shardings[i], g_in.params[i]->shape());
      add_mesh(in_ax[i]->mesh);
    }
  for (size_t i = 0; i < opt.out_shardings.size() && i < out_ax.size(); ++i)
    if (opt.out_shardings[i]) {
      out_ax[i] = axis_sharding(*opt.out_shardings[i], g_in.outputs[i]->shape());
      add_mesh(out_ax[i]->mesh);
    }
  if (meshes.empty()) {
    std::vector<Device> devs;
    for (int id : ids) devs.emplace_back(id);
    meshes.push_back(flat_mesh(devs));
  }
  p->common = unify_meshes(meshes);
  const MeshRef mesh = p->common.mesh;
  for (auto& o : out_ax)
    if (o) o = p->common.rewrite(*o);
  p->global = rewrite_for_mesh(g_in, p->common, out_ax);
  passes.after("rewrite-for-mesh", p->global);

  PropagationInput pin;
  pin.mesh = mesh;
  for (size_t i = 0; i < args.size(); ++i) {
    const ArrayImpl& ai = concrete(args[i]);
    std::optional<AxisSharding> fixed;
    if (in_ax[i]) fixed = p->common.rewrite(*in_ax[i]);
    if (ai.committed) {
      AxisSharding mine = p->common.rewrite(ai.layout);
      if (fixed && !same_placement(*fixed, mine, ai.shape))
        throw ShardingError("argument " + arg_name(opt, i) + " is committed to " + ai.sharding->str() +
                            " but in_shardings asks for " + opt.in_shardings[i]->str());
      fixed = mine;
    }
    pin.params.push_back(fixed);
  }
  p->assignment = propagate(p->global, pin);
  p->global_text = to_text(p->global, &p->assignment.value);
  passes.record("propagate", p->global_text);
  p->partitioned = partition(p->global, p->assignment);
  verify(p->partitioned.local);  // always: codegen trusts the partitioned program
  p->local_text = to_text(p->partitioned.local);
  passes.after("partition", p->partitioned.local, &p->local_text);
  p->committed_outputs = false;
  for (auto& a : args) p->committed_outputs = p->committed_outputs || concrete(a).committed;
  for (auto& s : opt.in_shardings) p->committed_outputs = p->committed_outputs || bool(s);
  for (auto& s : opt.out_shardings) p->committed_outputs = p->committed_outputs || bool(s);
  for (size_t k = 0; k < p->global.outputs.size(); ++k)
    p->output_user_shardings.push_back(
        user_sharding(p->partitioned.output_shardings[k], p->global.outputs[k]->shape(), p->common, args, g_in, opt));
  p->cost = cost_of(p->partitioned.local);
  p->communication = communication_of(p->partitioned.local);
  std::size_t code_bytes = 0;
  const codegen::JitThreadStats jit_before = codegen::Jit::thread_stats();
  if (compile) {
    codegen::Jit::get().set_disk_cache(config().compilation_cache_dir);
    codegen::CompileOptions copt;
    copt.threads_per_device = threads_per_device();
    copt.on_pass = [&](const char* pass, const Graph* graph, const std::string& text) {
      if (graph) passes.after(pass, *graph);
      else passes.record(pass, text);
    };
    auto c = codegen::compile(p->partitioned.local, copt);
    code_bytes = c.code_bytes;
    p->executable = c.executable;
    p->executable->cheap = is_cheap(*p, *p->executable);
    p->thunks_text = c.thunks_text;
    // The local program's exact key (every constant's every bit), not its
    // text (which shows a constant's first elements only) nor thunks_text
    // (which names this host's ISA): processes compare it at every meeting.
    c.executable->fingerprint = fingerprint(p->partitioned.local).digest();
    ++g_compiles;
    std::size_t arg = 0, out = 0, temp = 0;
    std::vector<bool> seen(c.executable->slots.size(), false);
    for (int s : c.executable->param_slots) arg += c.executable->slots[s].bytes, seen[s] = true;
    for (int s : c.executable->output_slots)
      if (!seen[s]) out += c.executable->slots[s].bytes, seen[s] = true;
    for (size_t s = 0; s < seen.size(); ++s)
      if (!seen[s]) temp += c.executable->slots[s].bytes;
    p->peak_bytes = c.executable->peak_bytes();
    p->memory = {{"argument_size_in_bytes", arg}, {"output_size_in_bytes", out}, {"temp_size_in_bytes", temp}, {"peak_memory_in_bytes", arg + p->peak_bytes}};
    passes.record("compile", p->thunks_text);
    if (config().log_compiles) log_compile(traced, args, opt, passes.times(), jit_before);
  }
  passes.dump(opt.name);
  program_cache().insert(std::move(key), p, program_bytes(*p, code_bytes));
  return p;
}

namespace {

std::string bytes_str(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int u = 0;
  while (b >= 1024 && u < 6) b /= 1024, ++u;
  std::ostringstream os;
  os.precision(u ? 3 : 0);
  os << std::fixed << b << ' ' << units[u];
  return os.str();
}

// RESOURCE_EXHAUSTED before any device allocates: what the run needs on all
// its devices together (they share the host's memory) beyond the host's memory.
void check_memory(const Program& p) {
  if (fits_host(p.peak_bytes, std::size_t(p.common.mesh->size()))) return;
  const double need = double(p.peak_bytes) * double(p.common.mesh->size());
  std::string largest;
  double most = -1;
  for (auto& node : p.partitioned.local.topo_order()) {
    const double b = double(numel(node->shape())) * double(dtype_size(node->dtype()));
    if (b > most) most = b, largest = aval_str(node->dtype(), node->shape());
  }
  throw ResourceExhaustedError("RESOURCE_EXHAUSTED: " + p.global.name + " needs " + bytes_str(double(p.peak_bytes)) +
                               " on each of its " + std::to_string(p.common.mesh->size()) + " device(s) " +
                               ids_str(p.common.mesh->device_ids()) + " (" + bytes_str(need) +
                               " in all; its largest per-device buffer is " + largest + "), more than the host's " +
                               bytes_str(double(rt::host_memory_bytes())) + " of memory");
}

}  // namespace

std::vector<Array> run(const Program& p, const std::vector<Array>& args) {
  TESSEL_CHECK_INTERNAL(p.executable, "running a program that was not compiled");
  if (const int dev = rt::current_device(); dev >= 0)
    throw ValueError("running " + p.global.name + " on device " + std::to_string(dev) +
                     "'s own thread: tessel computations cannot run inside ts::debug::callback (the devices are "
                     "running the program that called it; the callback receives host arrays to read)");
  rt::trace::Span span(rt::trace::kDispatchTrack, "dispatch");
  if (span.active()) span.name = p.global.name;
  check_memory(p);
  const MeshRef& mesh = p.common.mesh;
  const std::size_t n = std::size_t(mesh->size());
  std::vector<std::vector<rt::BufferRef>> inputs(n);
  for (size_t i = 0; i < args.size(); ++i) {
    const ArrayImpl& a = concrete(args[i]);
    const AxisSharding& want = p.partitioned.param_shardings[i];
    std::vector<rt::BufferRef> bufs;
    if (same_placement(a.layout, want, a.shape)) {
      bufs = a.buffers;
    } else {
      const std::size_t es = dtype_size(a.dtype);
      auto plan = rt::plan_transfer(a.shape, es, a.layout, want);
      bufs = rt::run_transfer(plan, a.shape, es, a.layout, a.buffers, want);
    }
    for (size_t pos = 0; pos < n; ++pos) inputs[pos].push_back(bufs[pos]);
  }
  auto outs =
      p.executable->launch(mesh->device_ids(), inputs, config().inline_cheap_programs, config().lockstep_launches);
  std::vector<Array> result;
  for (size_t k = 0; k < p.global.outputs.size(); ++k) {
    const Node& o = *p.global.outputs[k];
    std::vector<rt::BufferRef> bufs;
    for (size_t pos = 0; pos < n; ++pos) bufs.push_back(outs[pos].empty() ? nullptr : outs[pos][k]);  // another process's
    result.push_back(make_array(o.dtype(), o.shape(), o.aval.weak_type, p.output_user_shardings[k],
                                p.partitioned.output_shardings[k], p.committed_outputs, std::move(bufs)));
  }
  return result;
}

std::vector<Array> execute(const Graph& g, const std::vector<Array>& args, const LowerOptions& opt) {
  return run(*lower(g, args, opt), args);
}

}  // namespace tessel::detail
