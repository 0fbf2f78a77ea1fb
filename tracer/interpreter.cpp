#include "tracer/interpreter.hpp"

#include <cstring>
#include <unordered_map>

#include "tracer/errors.hpp"

namespace tessel {

namespace {

// A node's value: one array, or a tuple's elements.
using Value = std::vector<HostArray>;

std::vector<Value> run(const Graph& g, std::vector<Value> args) {
  std::unordered_map<const Node*, Value> values;
  for (size_t i = 0; i < args.size(); ++i) values[g.params[i].get()] = std::move(args[i]);
  for (auto& n : g.topo_order()) {
    if (n->op == Op::parameter) continue;
    std::vector<const Value*> in;
    for (auto& x : n->in) in.push_back(&values.at(x.get()));
    Value out;
    switch (op_family(n->op)) {
      case OpFamily::Tuple:
        // Structural: a tuple holds its operands; an element is one of them.
        if (n->op == Op::tuple) {
          for (auto* v : in) out.push_back(v->at(0));
        } else {
          out.push_back(in[0]->at(size_t(n->attr<attr::TupleIndex>().index)));
        }
        break;
      case OpFamily::Region: {
        // call: its body on the operands, by this same interpreter.
        std::vector<Value> sub;
        for (auto* v : in) sub.push_back(*v);
        for (auto& r : run(*n->attr<attr::Call>().body, std::move(sub))) out.push_back(std::move(r.at(0)));
        break;
      }
      default: {
        std::vector<const HostArray*> arrays;
        for (auto* v : in) arrays.push_back(&v->at(0));
        out.emplace_back();
        rules(n->op).eval(arrays, n->attrs, n->aval, out[0]);
      }
    }
    values[n.get()] = std::move(out);
  }
  std::vector<Value> outs;
  for (auto& o : g.outputs) outs.push_back(values.at(o.get()));
  return outs;
}

}  // namespace

std::vector<HostArray> interpret(const Graph& g, const std::vector<HostArray>& args) {
  if (args.size() != g.params.size())
    throw InternalError(detail::cat("interpret: ", g.params.size(), " parameters, ", args.size(), " arguments"));
  std::vector<Value> in;
  for (size_t i = 0; i < args.size(); ++i) {
    const Aval& a = g.params[i]->aval;
    if (args[i].dtype != a.dtype || args[i].shape != a.shape)
      throw InternalError(detail::cat("interpret: argument ", i, " is ", aval_str(args[i].dtype, args[i].shape),
                                      ", the parameter is ", a.str()));
    in.push_back({args[i]});
  }
  std::vector<HostArray> outs;
  for (auto& v : run(g, std::move(in))) {
    if (v.size() != 1) throw InternalError("interpret: a graph output is a tuple");
    outs.push_back(std::move(v[0]));
  }
  return outs;
}

HostArray host_array(DType dtype, const Shape& shape, const void* data) {
  HostArray h;
  h.dtype = dtype;
  h.shape = shape;
  h.bytes.resize(std::size_t(numel(shape)) * dtype_size(dtype));
  if (!h.bytes.empty()) std::memcpy(h.bytes.data(), data, h.bytes.size());
  return h;
}

}  // namespace tessel
