#include <tessel/jit.hpp>

#include <algorithm>
#include <chrono>
#include <sstream>

#include "dsl/src/array_impl.hpp"
#include "dsl/src/pipeline.hpp"
#include "dsl/src/trace.hpp"
#include "runtime/executable.hpp"
#include "runtime/trace.hpp"
#include "tessel/core/errors.hpp"
#include "tessel/warnings.hpp"

namespace tessel::detail {


Traced trace(const std::string& name, const std::vector<Array>& examples,
             const std::function<std::vector<Array>(const std::vector<Array>&,
                                                    std::function<std::any(const std::vector<Array>&)>&)>& fn) {
  Traced out;
  const auto t0 = std::chrono::steady_clock::now();
  rt::trace::Span span(rt::trace::kCompileTrack, "compile");
  if (span.active()) span.name = "trace " + name;
  std::vector<Aval> in;
  for (auto& e : examples) in.push_back(Aval{e.dtype(), e.shape(), e.weak_type()});
  TracedGraph tg = trace_graph(name, in, [&](const std::vector<Array>& tracers) { return fn(tracers, out.rebuild); });
  out.outputs = tg.g.outputs.size();
  out.captured = tg.trace->captured;
  out.graph_key = fingerprint(tg.g);
  out.graph = std::make_shared<Graph>(std::move(tg.g));
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

namespace {

using TNode = tree::detail::Node;

std::string node_str(const TNode& n) {
  auto keys = [&] {
    std::string k;
    for (size_t i = 0; i < n.keys.size(); ++i) k += (i ? ", " : "") + ("'" + n.keys[i] + "'");
    return k;
  };
  switch (n.kind) {
    case TNode::Leaf: return n.array ? "an array" : "a leaf";
    case TNode::List: return cat("a list of ", n.kids.size());
    case TNode::Tuple: return cat("a tuple of ", n.kids.size());
    case TNode::Dict: return "a dict with keys [" + keys() + "]";
    case TNode::Struct: return "a struct with fields (" + keys() + ")";
  }
  return "";
}

std::size_t leaves_below(const TNode& n, bool arrays_only) {
  if (n.kind == TNode::Leaf) return !arrays_only || n.array ? 1 : 0;
  std::size_t k = 0;
  for (auto& c : n.kids) k += leaves_below(c, arrays_only);
  return k;
}

// Appends, for every leaf of `arg` (its arrays only, for arguments), the
// sharding the tree `spec` gives it: spec must be a tree prefix of arg (JAX's
// rule: a leaf of spec covers the whole subtree below it).
void expand_spec(const TNode& spec, const std::vector<std::optional<Sharding>>& leaves, std::size_t& next,
                 const TNode& arg, bool arrays_only, const std::string& spec_path, const std::string& arg_path,
                 const std::string& what, std::vector<std::optional<Sharding>>& out) {
  if (spec.kind == TNode::Leaf) {
    const std::optional<Sharding>& s = leaves[next++];
    out.insert(out.end(), leaves_below(arg, arrays_only), s);
    return;
  }
  if (spec.kind != arg.kind || spec.kids.size() != arg.kids.size() || spec.keys != arg.keys)
    throw ValueError(cat(what, " specification must be a tree prefix of the ", arrays_only ? "positional arguments" : "result",
                         ", but ", spec_path, " is ", node_str(spec), " and ", arg_path, " is ", node_str(arg)));
  for (size_t k = 0; k < spec.kids.size(); ++k) {
    std::string step = spec.kind == TNode::Dict ? "['" + spec.keys[k] + "']"
                       : spec.kind == TNode::Struct ? "." + spec.keys[k]
                                                   : cat("[", k, "]");
    expand_spec(spec.kids[k], leaves, next, arg.kids[k], arrays_only, spec_path + step, arg_path + step, what, out);
  }
}

}  // namespace

std::shared_ptr<const Program> lower_traced(const Traced& t, const std::vector<Array>& args, const JitOptions& opt,
                                            const std::vector<int>& arg_of_leaf, const std::vector<TNode>& arg_nodes,
                                            bool compile) {
  const Graph& g = *std::static_pointer_cast<Graph>(t.graph);
  LowerOptions lo;
  lo.name = opt.name;
  lo.trace_seconds = t.seconds;
  lo.graph_key = t.graph_key.bytes().empty() ? nullptr : &t.graph_key;  // empty: not made by trace()
  lo.in_shardings.assign(g.params.size(), std::nullopt);
  const std::string in_what = cat("jit(", opt.name, "): in_shardings");
  for (size_t i = 0; i < arg_of_leaf.size(); ++i) {
    const int a = arg_of_leaf[i];
    const std::size_t e = opt.in_shardings.size() == 1 ? 0 : std::size_t(a);
    if (e >= opt.in_shardings.size()) continue;
    const ShardingTree& spec = opt.in_shardings[e];
    if (spec.is_leaf()) {
      lo.in_shardings[i] = spec.sharding();
      continue;
    }
    // A pytree of shardings: expand it over argument a's arrays, once.
    if (i > 0 && arg_of_leaf[i - 1] == a) continue;
    std::vector<std::optional<Sharding>> per;
    std::size_t next = 0;
    expand_spec(spec.node(), spec.leaves(), next, arg_nodes.at(std::size_t(a)), true, cat("in_shardings[", e, "]"),
                cat("args[", a, "]"), in_what, per);
    for (std::size_t k = 0; k < per.size(); ++k) lo.in_shardings[i + k] = per[k];
  }
  const std::size_t nout = g.outputs.size();
  lo.out_shardings.assign(nout, std::nullopt);
  const auto& outs = opt.out_shardings;
  const bool all_leaves = std::all_of(outs.begin(), outs.end(), [](const ShardingTree& s) { return s.is_leaf(); });
  const std::string out_what = cat("jit(", opt.name, "): out_shardings");
  std::vector<std::optional<Sharding>> per;
  if (outs.size() == 1) {
    std::size_t next = 0;
    expand_spec(outs[0].node(), outs[0].leaves(), next, t.out_node, false, "out_shardings", "the result", out_what,
                per);
  } else if (outs.size() > 1 && all_leaves && outs.size() == nout) {
    for (auto& s : outs) per.push_back(s.sharding());  // one per output array
  } else if (outs.size() > 1) {
    const TNode& r = t.out_node;
    if ((r.kind != TNode::List && r.kind != TNode::Tuple) || r.kids.size() != outs.size())
      throw ShardingError(cat("jit(", opt.name, "): out_shardings has ", outs.size(), " entries but the function returns ",
                              nout, " arrays", r.kind == TNode::List || r.kind == TNode::Tuple ? cat(" in ", r.kids.size(), " elements") : std::string(),
                              " (give one sharding per output array, one per element of the result, a pytree of "
                              "shardings like the result, or one for all)"));
    for (size_t k = 0; k < outs.size(); ++k) {
      std::size_t next = 0;
      expand_spec(outs[k].node(), outs[k].leaves(), next, r.kids[k], false, cat("out_shardings[", k, "]"),
                  cat("result[", k, "]"), out_what, per);
    }
  }
  if (!per.empty()) {
    if (per.size() != nout)  // internal: the result's structure and the graph's outputs disagree
      throw InternalError(cat("jit(", opt.name, "): out_shardings expanded to ", per.size(), " shardings for ", nout, " outputs"));
    lo.out_shardings = std::move(per);
  }
  return lower(g, args, lo, compile);
}

// JAX's rule (mlir.py, _set_up_aliases): each output takes the first donated
// argument of its shape and dtype not taken yet; a donated argument left
// over is a UserWarning naming its aval. (The launch then writes an output
// into a donated block only where Executable::write_over_safe allows.)
void warn_unusable_donations(const Program& p, const std::vector<bool>& donated) {
  const Graph& g = p.global;
  std::vector<bool> left(donated.begin(), donated.end());
  left.resize(g.params.size(), false);
  for (const NodeRef& o : g.outputs)
    for (std::size_t k = 0; k < left.size(); ++k)
      if (left[k] && g.params[k]->dtype() == o->dtype() && g.params[k]->shape() == o->shape()) {
        left[k] = false;
        break;
      }
  std::string names;
  for (std::size_t k = 0; k < left.size(); ++k)
    if (left[k]) names += (names.empty() ? "" : ", ") + cat("ShapedArray(", aval_str(g.params[k]->dtype(), g.params[k]->shape()), ")");
  if (!names.empty())
    warn(cat("Some donated buffers were not usable: ", names,
             ".\nSee an explanation at https://docs.jax.dev/en/latest/faq.html#buffer-donation."));
}

std::vector<Array> run_program(const Program& p, const std::vector<Array>& args, const std::vector<bool>& donated) {
  if (!donated.empty()) std::call_once(*p.donation_checked, [&] { warn_unusable_donations(p, donated); });
  return run(p, args, donated);
}

std::vector<bool> donated_inputs(const JitOptions& opt, const std::vector<int>& arg_of_leaf, std::size_t nargs,
                                 std::size_t ninputs) {
  if (opt.donate_argnums.empty()) return {};
  std::vector<bool> d(ninputs, false);
  const int n = int(nargs);
  for (std::size_t k = 0; k < arg_of_leaf.size() && k < ninputs; ++k)
    for (int s : opt.donate_argnums)
      if (s == arg_of_leaf[k] || s + n == arg_of_leaf[k]) d[k] = true;
  return d;
}

void check_jit_options(const JitOptions& opt, std::size_t nargs) {
  const int n = int(nargs);
  for (int s : opt.static_argnums)
    if (s >= n || s < -n)
      throw ValueError(cat("jit(", opt.name, "): static_argnums contains ", s, " but the function was called with ", n,
                           " positional argument", n == 1 ? "" : "s", " (valid: ", -n, " .. ", n - 1, ")"));
  for (int s : opt.donate_argnums)
    if (s >= n || s < -n)
      throw ValueError(cat("jit(", opt.name, "): donate_argnums contains ", s, " but the function was called with ", n,
                           " positional arguments"));
  if (opt.in_shardings.size() > 1 && opt.in_shardings.size() != nargs)
    throw ShardingError(cat("jit(", opt.name, "): in_shardings has ", opt.in_shardings.size(),
                            " entries but the function was called with ", n,
                            " positional arguments (give one per positional argument, or one for all)"));
}

void check_compiled_args(const Program& p, const std::vector<Array>& args, std::size_t captured) {
  const Graph& g = p.global;
  const std::size_t want = g.params.size() - captured;
  auto list = [&](auto aval_of, std::size_t n) {
    std::string s = "(";
    for (std::size_t i = 0; i < n; ++i) s += (i ? ", " : "") + aval_of(i);
    return s + ")";
  };
  auto compiled = [&] { return list([&](std::size_t i) { return aval_str(g.params[i]->dtype(), g.params[i]->shape()); }, want); };
  auto called = [&] {
    return list([&](std::size_t i) { return aval_str(args[i].dtype(), args[i].shape()); }, args.size());
  };
  if (args.size() != want)
    throw TypeError(cat("Compiled ", g.name, " called with ", args.size(), " array argument", args.size() == 1 ? "" : "s",
                        " but was compiled for ", want, ": compiled for ", compiled(), ", called with ", called()));
  for (std::size_t i = 0; i < want; ++i) {
    const Aval& a = g.params[i]->aval;
    if (args[i].dtype() != a.dtype || args[i].shape() != a.shape)
      throw TypeError(cat("Argument types differ from the types for which this computation was compiled. Argument ", i,
                          " of ", g.name, " was compiled for ", aval_str(a.dtype, a.shape), " and called with ",
                          aval_str(args[i].dtype(), args[i].shape()), ": compiled for ", compiled(), ", called with ",
                          called()));
  }
  for (std::size_t i = 0; i < want; ++i) {
    const ArrayImpl& ai = concrete(args[i]);
    if (!ai.committed) continue;  // uncommitted arrays move, as in a jit call
    const AxisSharding& c = p.partitioned.param_shardings[i];
    if (!same_placement(ai.layout, c, ai.shape))
      throw ShardingError(cat("Compiled object called with input sharding(s) does not match the sharding(s) the "
                              "computation was compiled with. For argument ", i, " (", aval_str(ai.dtype, ai.shape),
                              ") of ", g.name, ": compiled with ", c.spec_str(), " over ", c.mesh->str(),
                              " on devices ", ids_str(c.mesh->device_ids()), " and called with ", ai.sharding->str(),
                              " on devices ", ids_str(ai.layout.mesh->device_ids())));
  }
}

std::string program_text(const Program& p, bool compiled) {
  std::ostringstream os;
  if (!compiled) {
    os << "// traced program; sharding = what propagation chose, over " << p.common.mesh->str() << " on devices [";
    const auto& ids = p.common.mesh->device_ids();
    for (size_t i = 0; i < ids.size(); ++i) os << (i ? ", " : "") << ids[i];
    os << "]\n" << p.global_text;
    return os.str();
  }
  os << "// per-device SPMD program, run on " << p.common.mesh->size() << " device(s), mesh "
     << p.common.mesh->str() << "\n"
     << p.local_text << "// thunks\n"
     << p.thunks_text;
  return os.str();
}

std::string program_explanation(const Program& p) {
  const Graph& g = p.global;
  auto number = value_numbers(g);
  std::unordered_map<const Node*, std::string> notes;
  for (auto& [n, why] : p.assignment.reason) {
    std::string note = why;
    auto via = p.assignment.via.find(n);
    if (via != p.assignment.via.end() && via->second != n && number.count(via->second))
      note += " %" + std::to_string(number.at(via->second));
    notes[n] = note;
  }
  std::ostringstream os;
  os << "// why each value has its sharding, over " << p.common.mesh->str() << "\n"
     << to_text(g, &p.assignment.value, &notes);
  for (size_t k = 0; k < p.output_user_shardings.size() && k < g.outputs.size(); ++k)
    os << "// output " << k << " (%" << number.at(g.outputs[k].get()) << ") is delivered as "
       << p.output_user_shardings[k] << "\n";
  return os.str();
}

std::map<std::string, double> program_cost(const Program& p) {
  return {{"flops", p.cost.flops}, {"transcendentals", p.cost.transcendentals}, {"bytes accessed", p.cost.bytes_accessed}};
}

MemoryAnalysis program_memory(const Program& p, const std::vector<bool>& donated) {
  MemoryAnalysis m;
  auto get = [&](const char* k) { auto it = p.memory.find(k); return it == p.memory.end() ? std::size_t(0) : it->second; };
  m.argument_size_in_bytes = get("argument_size_in_bytes");
  m.output_size_in_bytes = get("output_size_in_bytes");
  m.temp_size_in_bytes = get("temp_size_in_bytes");
  m.peak_memory_in_bytes = get("peak_memory_in_bytes");
  // The outputs a launch binds to donated blocks (rt::Executable::launch's
  // rule, each argument once, each distinct output slot once).
  const rt::Executable* e = p.executable.get();
  if (e && donated.size() == e->param_slots.size()) {
    std::vector<bool> taken(donated.size(), false), seen(e->slots.size(), false);
    for (int s : e->param_slots) seen[std::size_t(s)] = true;
    for (int s : e->output_slots) {
      if (seen[std::size_t(s)]) continue;
      seen[std::size_t(s)] = true;
      for (std::size_t k = 0; k < donated.size(); ++k)
        if (donated[k] && !taken[k] && e->write_over_safe(int(k), s)) {
          taken[k] = true;
          m.alias_size_in_bytes += e->slots[std::size_t(s)].bytes;
          break;
        }
    }
    m.peak_memory_in_bytes -= std::min(m.peak_memory_in_bytes, m.alias_size_in_bytes);
  }
  return m;
}

std::vector<CollectiveTraffic> program_communication(const Program& p) {
  std::vector<CollectiveTraffic> out;
  for (auto& c : p.communication) out.push_back({c.collective, c.bytes_per_device});
  return out;
}

}  // namespace tessel::detail
