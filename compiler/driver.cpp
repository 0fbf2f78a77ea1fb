// The compile driver's pass script and the compile log (compiler/driver.hpp).
#include "compiler/driver.hpp"

#include <atomic>
#include <iostream>
#include <mutex>
#include <sstream>
#include <unordered_map>

#include "codegen/compile.hpp"
#include "codegen/jit.hpp"
#include "compiler/analysis.hpp"
#include "compiler/rewrite_for_mesh.hpp"
#include "runtime/device.hpp"
#include "tessel/core/errors.hpp"
#include "tracer/propagate.hpp"
#include "tracer/rewrite.hpp"

namespace tessel::compiler {

namespace {

std::atomic<std::size_t> g_compiles{0};

// How a program's arguments were laid out: for explaining a recompile.
struct CallSignature {
  std::vector<std::string> args;  // aval and sharding of each argument
  std::string program;            // the traced program's exact key
};

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

// The compile log's line (config().log_compiles): what was compiled, for
// which arguments, why, and each pass's time.
void log_compile(const Graph& traced, const std::vector<std::string>& arg_texts, const DriverOptions& opt,
                 const std::vector<std::pair<std::string, double>>& times, const codegen::JitThreadStats& before) {
  CallSignature sig;
  sig.args = arg_texts;
  sig.program = fingerprint(traced).bytes();
  const std::string why = compile_reason(opt.name, sig);
  const codegen::JitThreadStats after = codegen::Jit::thread_stats();
  double total = opt.trace_seconds;
  for (auto& [pass, s] : times) total += s;
  std::ostringstream os;
  os.setf(std::ios::fixed);
  os.precision(2);
  os << "tessel: compiled " << opt.title << " for (";
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

// The common mesh: the meshes of committed arguments, constraints,
// shard_maps and given shardings over the program's devices, in that order;
// a flat mesh of its devices when none names one.
CommonMesh common_mesh(const Graph& g, const LowerInputs& in) {
  std::vector<MeshRef> meshes;
  auto add_mesh = [&](const MeshRef& m) {
    for (auto& x : meshes)
      if (x == m || *x == *m) return;
    if (m->device_ids() == in.device_ids) meshes.push_back(m);
  };
  for (auto& p : in.params)
    if (p.committed) add_mesh(p.committed->mesh);
  for (auto& n : g.topo_order())
    if (n->op == Op::sharding_constraint) add_mesh(n->attr<attr::Constraint>().sharding->mesh);
    else if (n->op == Op::shard_map) add_mesh(n->attr<attr::ShardMap>().mesh);
  for (auto& p : in.params)
    if (p.given) add_mesh(p.given->mesh);
  for (auto& o : in.outputs)
    if (o) add_mesh(o->mesh);
  if (meshes.empty()) meshes.push_back(in.flat_mesh);
  return unify_meshes(meshes);
}

// Each parameter's fixed sharding on the common mesh: its committed layout,
// else its in_sharding; ShardingError when both are given and differ.
PropagationInput propagation_input(const LowerInputs& in, const CommonMesh& cm) {
  PropagationInput pin;
  pin.mesh = cm.mesh;
  for (auto& p : in.params) {
    std::optional<AxisSharding> fixed;
    if (p.given) fixed = cm.rewrite(*p.given);
    if (p.committed) {
      AxisSharding mine = cm.rewrite(*p.committed);
      if (fixed && !same_placement(*fixed, mine, p.shape))
        throw ShardingError("argument " + p.what + " is committed to " + p.committed_text +
                            " but in_shardings asks for " + p.given_text);
      fixed = mine;
    }
    pin.params.push_back(fixed);
  }
  return pin;
}

// Argument, output and temporary bytes per device, and the peak.
void measure_memory(const rt::Executable& e, Program& p) {
  std::size_t arg = 0, out = 0, temp = 0;
  std::vector<bool> seen(e.slots.size(), false);
  for (int s : e.param_slots) arg += e.slots[s].bytes, seen[s] = true;
  for (int s : e.output_slots)
    if (!seen[s]) out += e.slots[s].bytes, seen[s] = true;
  for (size_t s = 0; s < seen.size(); ++s)
    if (!seen[s]) temp += e.slots[s].bytes;
  p.peak_bytes = e.peak_bytes();
  p.memory = {{"argument_size_in_bytes", arg}, {"output_size_in_bytes", out}, {"temp_size_in_bytes", temp}, {"peak_memory_in_bytes", arg + p.peak_bytes}};
}

}  // namespace

Driver::Driver(const Graph& traced, DriverOptions opt)
    : traced_(traced), opt_(std::move(opt)), passes_(opt_.name, opt_.dump_dir) {
  passes_.given("trace", traced_);
  // Calls become their bodies: every later pass sees plain primitives.
  calls_ = has_calls(traced_);
  if (calls_) {
    inlined_ = inline_calls(traced_);
    passes_.after("inline-calls", inlined_);
  }
}

std::size_t Driver::run(const LowerInputs& in, Program& p) {
  const Graph& g_in = inlined();
  p.common = common_mesh(g_in, in);
  std::vector<std::optional<AxisSharding>> outs = in.outputs;
  for (auto& o : outs)
    if (o) o = p.common.rewrite(*o);
  p.global = rewrite_for_mesh(g_in, p.common, outs);
  passes_.after("rewrite-for-mesh", p.global);

  p.assignment = propagate(p.global, propagation_input(in, p.common));
  p.global_text = to_text(p.global, &p.assignment.value);
  passes_.record("propagate", p.global_text);

  p.partitioned = partition(p.global, p.assignment);
  verify(p.partitioned.local);  // always: codegen trusts the partitioned program
  p.local_text = to_text(p.partitioned.local);
  passes_.after("partition", p.partitioned.local, &p.local_text);
  p.cost = cost_of(p.partitioned.local);
  p.communication = communication_of(p.partitioned.local);

  std::size_t code_bytes = 0;
  const codegen::JitThreadStats jit_before = codegen::Jit::thread_stats();
  if (in.compile) {
    codegen::Jit::get().set_disk_cache(opt_.compilation_cache_dir);
    codegen::CompileOptions copt;
    copt.threads_per_device = opt_.threads_per_device;
    if (p.assignment.mesh && rt::Runtime::started()) {
      copt.local_devices = 0;
      for (int id : p.assignment.mesh->device_ids()) copt.local_devices += rt::Runtime::get().is_local(id);
    }
    // codegen's own passes, logged like these.
    copt.on_pass = [&](const char* pass, const Graph* graph, const std::string& text) {
      if (graph) passes_.after(pass, *graph);
      else passes_.record(pass, text);
    };
    auto c = codegen::compile(p.partitioned.local, copt);
    code_bytes = c.code_bytes;
    p.executable = c.executable;
    p.executable->cheap = is_cheap(p, *p.executable);
    p.thunks_text = c.thunks_text;
    // The local program's exact key (every constant's every bit), not its
    // text (which shows a constant's first elements only) nor thunks_text
    // (which names this host's ISA): processes compare it at every meeting.
    c.executable->fingerprint = fingerprint(p.partitioned.local).digest();
    ++g_compiles;
    measure_memory(*c.executable, p);
    passes_.record("compile", p.thunks_text);
    if (opt_.log_compiles) log_compile(traced_, in.arg_texts, opt_, passes_.times(), jit_before);
  }
  passes_.dump(opt_.name);
  return code_bytes;
}

std::size_t compile_count() { return g_compiles.load(); }

}  // namespace tessel::compiler
