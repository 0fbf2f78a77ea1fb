#include "dsl/src/staged.hpp"

#include "dsl/src/trace.hpp"

namespace tessel::detail {

std::vector<Array> staged_many(const std::string& name, const std::vector<Array>& xs,
                               const std::function<std::vector<Array>(const std::vector<Array>&)>& fn) {
  if (trace_of(xs)) return fn(xs);
  std::vector<Aval> in;
  in.reserve(xs.size());
  for (auto& x : xs) in.push_back(Aval{x.dtype(), x.shape(), x.weak_type()});
  TracedGraph tg = trace_graph(name, in, fn);
  std::vector<Array> args = xs;
  args.insert(args.end(), tg.trace->captured.begin(), tg.trace->captured.end());
  return call_graph(tg.g, args, name);
}

Array staged(const std::string& name, const std::vector<Array>& xs,
             const std::function<Array(const std::vector<Array>&)>& fn) {
  return staged_many(name, xs, [&](const std::vector<Array>& v) { return std::vector<Array>{fn(v)}; })[0];
}

}  // namespace tessel::detail
