// ts::ffi::call and ts::pure_callback (dsl/tessel/ffi.hpp): the sharding
// rule parsed into factors, the user's function wrapped as a host_call
// node (tracer/rules_host_call.cpp has its rules, codegen/library.cpp its
// thunk).
#include <tessel/ffi.hpp>

#include <atomic>
#include <cctype>
#include <cstring>
#include <map>
#include <sstream>

#include "dsl/src/trace.hpp"
#include "tracer/build.hpp"
#include "tessel/core/errors.hpp"

namespace tessel::detail {

namespace {

std::atomic<std::int64_t> g_next_call{1};

std::int64_t vmap_method_of(const std::string& name, const std::string& m) {
  if (m.empty()) return 0;
  if (m == "sequential") return 1;
  if (m == "sequential_unrolled") return 2;
  if (m == "expand_dims") return 3;
  if (m == "broadcast_all") return 4;
  throw ValueError(cat(name, ": vmap_method must be one of \"sequential\", \"sequential_unrolled\", \"expand_dims\" "
                             "or \"broadcast_all\", got \"", m, "\""));
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == sep) {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  out.push_back(cur);
  return out;
}

std::vector<std::string> words(const std::string& s) {
  std::istringstream is(s);
  std::vector<std::string> out;
  for (std::string w; is >> w;) out.push_back(w);
  return out;
}

bool is_name(const std::string& w) {
  if (w.empty() || !(std::isalpha(static_cast<unsigned char>(w[0])) || w[0] == '_')) return false;
  for (char c : w)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  return true;
}

// The rule as factor ids per dim (-1: a size-1 dim), each factor's size,
// and the factors to gather whole.
struct Parsed {
  std::vector<std::vector<std::int64_t>> operands, results;
  std::vector<std::int64_t> sizes, replicated;
};

Parsed parse_rule(const std::string& name, const std::string& rule, const std::vector<std::string>& need_replication,
                  const std::vector<Array>& args, const std::vector<ShapeDtypeStruct>& results) {
  Parsed p;
  if (rule.find_first_not_of(" \t\n") == std::string::npos) {
    // No rule: every dim a factor of its own, gathered whole.
    auto whole = [&](const Shape& shape) {
      std::vector<std::int64_t> dims;
      for (auto d : shape) {
        dims.push_back(std::int64_t(p.sizes.size()));
        p.replicated.push_back(dims.back());
        p.sizes.push_back(d);
      }
      return dims;
    };
    for (auto& a : args) p.operands.push_back(whole(a.shape()));
    for (auto& r : results) p.results.push_back(whole(r.shape));
    return p;
  }
  const auto arrow = rule.find("->");
  if (arrow == std::string::npos || rule.find("->", arrow + 2) != std::string::npos)
    throw ValueError(cat(name, ": the sharding rule \"", rule, "\" needs one \"->\" between operands and results"));
  std::vector<std::string> lhs = split(rule.substr(0, arrow), ','), rhs = split(rule.substr(arrow + 2), ',');
  if (args.empty() && lhs.size() == 1 && words(lhs[0]).empty()) lhs.clear();
  if (lhs.size() != args.size())
    throw ValueError(cat(name, ": the sharding rule \"", rule, "\" names ", lhs.size(), " operands, the call has ",
                         args.size()));
  if (rhs.size() != results.size())
    throw ValueError(cat(name, ": the sharding rule \"", rule, "\" names ", rhs.size(), " results, result_shape_dtypes has ",
                         results.size()));
  std::map<std::string, std::int64_t> id;
  auto dims_of = [&](const std::string& spec, const Shape& shape, const std::string& what, bool operand) {
    const std::vector<std::string> ws = words(spec);
    if (ws.size() != shape.size())
      throw ValueError(cat(name, ": ", what, " has shape ", shape_str(shape), " (rank ", shape.size(),
                           "), the sharding rule \"", rule, "\" gives it ", ws.size(), " factors"));
    std::vector<std::int64_t> dims;
    for (std::size_t d = 0; d < ws.size(); ++d) {
      if (ws[d] == "1") {
        if (shape[d] != 1)
          throw ValueError(cat(name, ": ", what, " dim ", d, " is ", shape[d], ", the sharding rule says 1"));
        dims.push_back(-1);
        continue;
      }
      if (!is_name(ws[d]))
        throw ValueError(cat(name, ": \"", ws[d], "\" in the sharding rule \"", rule, "\" is not a factor name"));
      auto it = id.find(ws[d]);
      if (it == id.end()) {
        if (!operand)
          throw ValueError(cat(name, ": factor '", ws[d], "' of ", what, " is in no operand of the sharding rule \"",
                               rule, "\""));
        it = id.emplace(ws[d], std::int64_t(p.sizes.size())).first;
        p.sizes.push_back(shape[d]);
      } else if (p.sizes[std::size_t(it->second)] != shape[d]) {
        throw ValueError(cat(name, ": factor '", ws[d], "' is ", p.sizes[std::size_t(it->second)],
                             " long elsewhere but ", shape[d], " in ", what, " dim ", d, " (sharding rule \"", rule, "\")"));
      }
      dims.push_back(it->second);
    }
    return dims;
  };
  for (std::size_t k = 0; k < args.size(); ++k)
    p.operands.push_back(dims_of(lhs[k], args[k].shape(), cat("operand ", k), true));
  for (std::size_t k = 0; k < results.size(); ++k)
    p.results.push_back(dims_of(rhs[k], results[k].shape, cat("result ", k), false));
  for (auto& f : need_replication) {
    auto it = id.find(f);
    if (it == id.end())
      throw ValueError(cat(name, ": need_replication names '", f, "', not a factor of the sharding rule \"", rule, "\""));
    p.replicated.push_back(it->second);
  }
  return p;
}

std::vector<Array> host_call(const std::string& name, std::shared_ptr<const attr::HostCallFn> fn,
                             const std::vector<ShapeDtypeStruct>& results, const Parsed& rule, std::int64_t vmap_method,
                             const std::vector<Array>& args) {
  if (results.empty()) throw ValueError(cat(name, ": result_shape_dtypes holds no result"));
  for (auto& r : results)
    if (r.sharding) throw ValueError(cat(name, ": a result's ShapeDtypeStruct may not give a sharding (the sharding rule does)"));
  attr::HostCall a;
  a.id = g_next_call++;
  a.name = name;
  for (auto& r : results) a.dtypes.push_back(r.dtype), a.shapes.push_back(r.shape);
  a.operand_factors = rule.operands;
  a.result_factors = rule.results;
  a.sizes = rule.sizes;
  a.replicated = rule.replicated;
  a.vmap_method = vmap_method;
  a.fn = std::move(fn);
  return apply(name, args, [&](NodeTable& t, const std::vector<NodeRef>& ns) {
    return build::results(t, build::host_call(t, ns, a));
  });
}

}  // namespace

std::vector<Array> pure_callback_leaves(const HostFn& fn, const std::vector<ShapeDtypeStruct>& results,
                                        const PureCallbackOptions& options, const std::vector<Array>& args) {
  const std::string name = "pure_callback";
  if (!fn) throw ValueError("pure_callback: the function is empty");
  auto host = std::make_shared<const attr::HostCallFn>(
      [fn, results](const std::vector<attr::HostCallArg>& in, const std::vector<attr::HostCallArg>& out) {
        std::vector<Array> xs;
        for (auto& x : in) xs.push_back(from_host(x.dtype, x.shape, x.data));
        const std::vector<Array> ys = fn(xs);
        if (ys.size() != out.size())
          throw ValueError(cat("pure_callback: the callback returned ", ys.size(), " arrays, result_shape_dtypes has ",
                               out.size()));
        for (std::size_t k = 0; k < out.size(); ++k) {
          if (ys[k].shape() != out[k].shape)
            throw ValueError(cat("pure_callback: incorrect output shape for return value #", k, ": expected ",
                                 shape_str(out[k].shape), ", got ", shape_str(ys[k].shape())));
          if (ys[k].dtype() != out[k].dtype)
            throw ValueError(cat("pure_callback: incorrect output dtype for return value #", k, ": expected ",
                                 dtype_name(out[k].dtype), ", got ", dtype_name(ys[k].dtype())));
          visit_dtype(out[k].dtype, [&](auto tag) {
            using T = decltype(tag);
            const auto v = ys[k].to_vector<T>();
            if constexpr (std::is_same_v<T, bool>) {
              for (std::size_t i = 0; i < v.size(); ++i) static_cast<unsigned char*>(out[k].data)[i] = v[i];
            } else if (!v.empty()) {
              std::memcpy(out[k].data, v.data(), v.size() * sizeof(T));
            }
          });
        }
      });
  return host_call(name, host, results, parse_rule(name, "", {}, args, results), vmap_method_of(name, options.vmap_method),
                   args);
}

}  // namespace tessel::detail

namespace tessel::ffi::detail {

std::vector<Array> call_leaves(const Kernel& fn, const std::vector<ShapeDtypeStruct>& results,
                               const CallOptions& options, const std::vector<Array>& args) {
  using tessel::detail::cat;
  const std::string& name = options.name;
  if (!fn) throw ValueError(cat(name, ": the kernel is empty"));
  auto host = std::make_shared<const attr::HostCallFn>(
      [fn](const std::vector<attr::HostCallArg>& in, const std::vector<attr::HostCallArg>& out) {
        std::vector<Buffer> bi, bo;
        for (auto& x : in) bi.emplace_back(x.data, x.shape, x.dtype, x.device);
        for (auto& y : out) bo.emplace_back(y.data, y.shape, y.dtype, y.device);
        fn(std::span<const Buffer>(bi), std::span<Buffer>(bo));
      });
  const auto rule = tessel::detail::parse_rule(name, options.sharding_rule, options.need_replication, args, results);
  return tessel::detail::host_call(name, host, results, rule, tessel::detail::vmap_method_of(name, options.vmap_method),
                                   args);
}

}  // namespace tessel::ffi::detail
