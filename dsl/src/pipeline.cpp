// The user's side of compiling (dsl/src/pipeline.hpp): arrays, shardings and
// options become the compile driver's inputs (compiler/driver.hpp), its
// Program gets the shardings users see, and run() takes and returns arrays.
#include "dsl/src/pipeline.hpp"

#include <tessel/device.hpp>

#include "compiler/analysis.hpp"
#include "compiler/driver.hpp"
#include "dsl/src/array_impl.hpp"
#include "dsl/src/sharding_impl.hpp"
#include "runtime/device.hpp"
#include "runtime/trace.hpp"
#include "runtime/transfer.hpp"
#include "tessel/core/errors.hpp"

namespace tessel::detail {

namespace {

compiler::ProgramCache<Program>& program_cache() {
  static auto* c = new compiler::ProgramCache<Program>;  // outlives every static that may compile at exit
  return *c;
}

// Built with += (GCC 12's -Wrestrict misreads "x" + std::string&& once inlined here).
std::string arg_name(const LowerOptions& opt, size_t i) {
  std::string s = opt.is_op ? "x" : "";
  s += std::to_string(opt.is_op ? i + 1 : i);
  s += opt.is_op ? " of " : " of jit(";
  s += opt.name;
  if (!opt.is_op) s += ')';
  return s;
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


// The sharding users see for an output laid out as s: an argument's that
// places it alike, a single device, or a NamedSharding on a mesh they gave.
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

std::string arg_text(const Array& a) {
  const ArrayImpl& ai = concrete(a);
  std::string s = aval_str(ai.dtype, ai.shape);
  if (ai.committed) s += ' ', s += ai.sharding->str();
  else s += " (uncommitted)";
  return s;
}

// What the passes after inline-calls take: each argument's layout and
// in_sharding, the out_shardings, on the devices assigned.
compiler::LowerInputs lower_inputs(const Graph& g_in, const std::vector<Array>& args, const LowerOptions& opt,
                                   bool compile) {
  compiler::LowerInputs in;
  in.device_ids = device_assignment(g_in, args, opt);
  std::vector<Device> devs;
  for (int id : in.device_ids) devs.emplace_back(id);
  in.flat_mesh = flat_mesh(devs);
  in.params.resize(args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    const ArrayImpl& ai = concrete(args[i]);
    compiler::ParamInput& p = in.params[i];
    p.shape = ai.shape;
    if (ai.committed) p.committed = ai.layout, p.committed_text = ai.sharding->str();
    p.what = arg_name(opt, i);
  }
  for (size_t i = 0; i < opt.in_shardings.size() && i < g_in.params.size() && i < in.params.size(); ++i)
    if (opt.in_shardings[i]) {
      in.params[i].given = axis_sharding(*opt.in_shardings[i], g_in.params[i]->shape());
      in.params[i].given_text = opt.in_shardings[i]->str();
    }
  in.outputs.resize(g_in.outputs.size());
  for (size_t i = 0; i < opt.out_shardings.size() && i < in.outputs.size(); ++i)
    if (opt.out_shardings[i]) in.outputs[i] = axis_sharding(*opt.out_shardings[i], g_in.outputs[i]->shape());
  if (compile && config().log_compiles)
    for (auto& a : args) in.arg_texts.push_back(arg_text(a));
  in.compile = compile;
  return in;
}

}  // namespace

// The compile driver's pass script (compiler/driver.hpp) between the cache
// and the shardings users see: inline-calls, then the device assignment
// here, then rewrite-for-mesh, propagate, partition, compile.
std::shared_ptr<const Program> lower(const Graph& traced, const std::vector<Array>& args, const LowerOptions& opt,
                                     bool compile) {
  Key key = program_key(traced, args, opt);
  if (auto hit = program_cache().find(key, compile)) return hit;

  const Config& c = config();
  compiler::DriverOptions dopt;
  dopt.name = opt.name;
  dopt.title = opt.is_op ? opt.name : "jit(" + opt.name + ")";
  dopt.dump_dir = c.dump_dir;
  dopt.log_compiles = c.log_compiles;
  dopt.trace_seconds = opt.trace_seconds;
  if (compile) {
    dopt.compilation_cache_dir = c.compilation_cache_dir;
    dopt.threads_per_device = threads_per_device();
  }
  compiler::Driver driver(traced, std::move(dopt));
  const Graph& g_in = driver.inlined();
  const compiler::LowerInputs in = lower_inputs(g_in, args, opt, compile);

  auto p = std::make_shared<Program>();
  const std::size_t code_bytes = driver.run(in, *p);
  p->committed_outputs = false;
  for (auto& a : args) p->committed_outputs = p->committed_outputs || concrete(a).committed;
  for (auto& s : opt.in_shardings) p->committed_outputs = p->committed_outputs || bool(s);
  for (auto& s : opt.out_shardings) p->committed_outputs = p->committed_outputs || bool(s);
  for (size_t k = 0; k < p->global.outputs.size(); ++k)
    p->output_user_shardings.push_back(
        user_sharding(p->partitioned.output_shardings[k], p->global.outputs[k]->shape(), p->common, args, g_in, opt));
  program_cache().insert(std::move(key), p, compiler::program_bytes(*p, code_bytes, sizeof(Program)),
                         c.compile_cache_max_entries, c.compile_cache_max_bytes);
  return p;
}

std::vector<Array> run(const Program& p, const std::vector<Array>& args, const std::vector<bool>& donated) {
  TESSEL_CHECK_INTERNAL(p.executable, "running a program that was not compiled");
  if (const int dev = rt::current_device(); dev >= 0)
    throw ValueError("running " + p.global.name + " on device " + std::to_string(dev) +
                     "'s own thread: tessel computations cannot run inside ts::debug::callback (the devices are "
                     "running the program that called it; the callback receives host arrays to read)");
  rt::trace::Span span(rt::trace::kDispatchTrack, "dispatch");
  if (span.active()) span.name = p.global.name;
  compiler::check_memory(p);
  const MeshRef& mesh = p.common.mesh;
  const std::size_t n = std::size_t(mesh->size());
  std::vector<std::vector<rt::BufferRef>> inputs(n);
  const bool donating = std::find(donated.begin(), donated.end(), true) != donated.end();
  if (donating) {
    TESSEL_CHECK_INTERNAL(donated.size() == args.size(), "donation flags for ", donated.size(), " of ", args.size(),
                          " arguments");
    for (size_t i = 0; i < args.size(); ++i)
      for (size_t j = 0; j < args.size() && donated[i]; ++j)
        if (j != i && args[j].impl() == args[i].impl())
          throw ValueError(cat(p.global.name, ": argument ", i, " (", aval_str(args[i].dtype(), args[i].shape()),
                               ") is donated and is also input ", j,
                               " (the same array passed twice, or closed over): Attempt to donate the same buffer "
                               "twice"));
  }
  std::vector<bool> as_is(args.size(), false);  // passed with their own buffers, not moved
  for (size_t i = 0; i < args.size(); ++i) {
    const ArrayImpl& a = concrete(args[i]);
    const AxisSharding& want = p.partitioned.param_shardings[i];
    std::vector<rt::BufferRef> bufs;
    if (same_placement(a.layout, want, a.shape)) {
      as_is[i] = true;
      bufs = a.buffers;
    } else {
      const std::size_t es = dtype_size(a.dtype);
      auto plan = rt::plan_transfer(a.shape, es, a.layout, want);
      bufs = rt::run_transfer(plan, a.shape, es, a.layout, a.buffers, want);
    }
    for (size_t pos = 0; pos < n; ++pos) inputs[pos].push_back(std::move(bufs[pos]));
  }
  // A donated argument gives its buffers up now, so that the launch holds
  // their only references (an output may take one over); it stays deleted.
  // (A failed launch ran nothing: the arguments get their buffers back, from
  // the inputs where they were passed as they are.)
  std::vector<std::vector<rt::BufferRef>> moved(args.size());
  for (size_t i = 0; i < args.size() && donating; ++i)
    if (donated[i]) {
      if (!as_is[i]) moved[i] = std::move(args[i].impl()->buffers);
      args[i].impl()->buffers.clear();
      args[i].impl()->deleted = true;
    }
  std::vector<std::vector<rt::BufferRef>> outs;
  try {
    outs = p.executable->launch(mesh->device_ids(), inputs, config().inline_cheap_programs, config().lockstep_launches,
                                donating ? &donated : nullptr);
  } catch (...) {
    for (size_t i = 0; i < args.size() && donating; ++i)
      if (donated[i]) {
        ArrayImpl& a = *args[i].impl();
        if (as_is[i])
          for (size_t pos = 0; pos < n; ++pos) a.buffers.push_back(inputs[pos][i]);
        else
          a.buffers = std::move(moved[i]);
        a.deleted = false;
      }
    throw;
  }
  moved.clear();
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
  return run(*lower(g, args, opt), args, {});
}

std::size_t compile_count() { return compiler::compile_count(); }
CacheStats compile_cache_stats() { return program_cache().stats(); }

}  // namespace tessel::detail
