#include "dsl/src/staged.hpp"

#include <tessel/ops.hpp>

#include "dsl/src/compose.hpp"
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

Array inexact(const Array& x) {
  if (is_inexact(x.dtype())) return x;
  return apply1("inexact", {x}, [](NodeTable& t, const std::vector<NodeRef>& in) { return compose::to_inexact(t, in[0]); });
}

int axis_in(int axis, int rank, const char* what) { return int(compose::norm_axis(axis, rank, what)); }

Array along(const Array& x, int axis, std::int64_t start, std::int64_t stop) {
  std::vector<IndexItem> items;
  for (int d = 0; d < axis; ++d) items.push_back(all);
  items.push_back(slice(start, stop));
  return x.index(items);
}

Array run_starts(const Array& s) {
  const std::int64_t n = s.size();
  if (n == 0) return zeros({0}, DType::bool_);
  Array prev = s[slice(0, n - 1)], next = s[slice(1, n)];
  Array differ = next != prev;
  if (is_inexact(s.dtype())) differ = logical_and(differ, logical_not(logical_and(isnan(next), isnan(prev))));
  return concatenate({ones({1}, DType::bool_), differ}, 0);
}

}  // namespace tessel::detail
