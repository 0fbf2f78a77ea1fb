#include "tracer/interpreter.hpp"

#include <cstring>
#include <unordered_map>

#include "tracer/errors.hpp"

namespace tessel {

std::vector<HostArray> interpret(const Graph& g, const std::vector<HostArray>& args) {
  if (args.size() != g.params.size())
    throw InternalError(detail::cat("interpret: ", g.params.size(), " parameters, ", args.size(), " arguments"));
  std::unordered_map<const Node*, HostArray> values;
  for (size_t i = 0; i < args.size(); ++i) {
    const Aval& a = g.params[i]->aval;
    if (args[i].dtype != a.dtype || args[i].shape != a.shape)
      throw InternalError(detail::cat("interpret: argument ", i, " is ", aval_str(args[i].dtype, args[i].shape),
                                      ", the parameter is ", a.str()));
    values[g.params[i].get()] = args[i];
  }
  for (auto& n : g.topo_order()) {
    if (n->op == Op::parameter) continue;
    std::vector<const HostArray*> in;
    for (auto& x : n->in) in.push_back(&values.at(x.get()));
    HostArray out;
    rules(n->op).eval(in, n->attrs, n->aval, out);
    values[n.get()] = std::move(out);
  }
  std::vector<HostArray> outs;
  for (auto& o : g.outputs) outs.push_back(values.at(o.get()));
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
