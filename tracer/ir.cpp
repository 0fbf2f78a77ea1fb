#include "tracer/ir.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <cstring>
#include <functional>
#include <sstream>
#include <unordered_set>

#include "tracer/errors.hpp"
#include "tracer/rules.hpp"

namespace tessel {

namespace {

inline void mix(std::size_t& h, std::size_t v) { h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2); }

template <class T>
void mix_vec(std::size_t& h, const std::vector<T>& v) {
  mix(h, v.size());
  for (auto& x : v) mix(h, std::hash<T>()(x));
}

const char* short_dtype(DType t) {
  switch (t) {
    case DType::bool_: return "pred";
    case DType::int32: return "s32";
    case DType::int64: return "s64";
    case DType::uint32: return "u32";
    case DType::float32: return "f32";
    case DType::float64: return "f64";
  }
  __builtin_unreachable();
}

}  // namespace

std::string Aval::str() const {
  std::ostringstream os;
  os << short_dtype(dtype) << '[';
  for (size_t i = 0; i < shape.size(); ++i) os << (i ? "," : "") << shape[i];
  os << ']';
  if (weak_type) os << "{weak}";
  return os.str();
}

std::size_t Literal::hash() const {
  std::size_t h = std::size_t(dtype);
  mix_vec(h, shape);
  mix(h, std::hash<std::string_view>()(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size())));
  return h;
}

double Literal::as_double(std::int64_t i) const {
  return visit_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    T v;
    std::memcpy(&v, bytes.data() + std::size_t(i) * sizeof(T), sizeof(T));
    return double(v);
  });
}

std::shared_ptr<const Literal> Literal::scalar(DType t, double v) {
  auto l = std::make_shared<Literal>();
  l->dtype = t;
  l->bytes.resize(dtype_size(t));
  visit_dtype(t, [&](auto tag) {
    using T = decltype(tag);
    T x;
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      // Defined for every double (a cast out of range is undefined): NaN is
      // 0, values beyond the dtype saturate. Exact identities use
      // reduction_identity, never this.
      using L = std::numeric_limits<T>;
      if (std::isnan(v)) x = 0;
      else if (v <= double(L::lowest())) x = L::lowest();
      else if (v >= double(L::max())) x = L::max();
      else x = T(v);
    } else {
      x = T(v);
    }
    std::memcpy(l->bytes.data(), &x, sizeof(T));
  });
  return l;
}

bool Params::operator==(const Params& o) const {
  auto same_ptr = [](const auto& a, const auto& b) { return a == b || (a && b && *a == *b); };
  return dims == o.dims && lo == o.lo && hi == o.hi && step == o.step && dot == o.dot && dtype == o.dtype &&
         same_ptr(literal, o.literal) && same_ptr(sharding, o.sharding) && same_ptr(mesh, o.mesh) &&
         mesh_axes == o.mesh_axes && reduce_op == o.reduce_op && pairs == o.pairs;
}

std::size_t Params::hash() const {
  std::size_t h = 0;
  mix_vec(h, dims);
  mix_vec(h, lo);
  mix_vec(h, hi);
  mix_vec(h, step);
  mix_vec(h, dot.lhs_contract);
  mix_vec(h, dot.rhs_contract);
  mix_vec(h, dot.lhs_batch);
  mix_vec(h, dot.rhs_batch);
  mix(h, std::size_t(dtype));
  if (literal) mix(h, literal->hash());
  if (sharding) mix(h, std::hash<std::string>()(sharding->spec_str()));
  mix_vec(h, mesh_axes);
  mix(h, std::size_t(reduce_op));
  for (auto& [a, b] : pairs) mix(h, std::size_t(a * 131 + b));
  return h;
}

Node::~Node() {
  std::vector<NodeRef> pending = std::move(in);
  while (!pending.empty()) {
    NodeRef x = std::move(pending.back());
    pending.pop_back();
    // The last owner (nothing holds weak references to nodes): take its
    // operands over, so that it dies with none and the chain unwinds here.
    if (x.use_count() == 1) {
      // use_count() is a relaxed load: order the other owners' last reads of
      // x->in (before their release) before our writes.
      std::atomic_thread_fence(std::memory_order_acquire);
      auto& operands = const_cast<Node&>(*x).in;  // made non-const by make_shared<Node>
      for (auto& y : operands) pending.push_back(std::move(y));
      operands.clear();
    }
  }
}

NodeRef NodeTable::make(Op op, std::vector<NodeRef> in, Aval aval, Params p) {
  check_shape(aval.shape, aval.dtype, op_name(op));
  std::size_t h = std::size_t(op);
  for (auto& x : in) mix(h, std::hash<const void*>()(x.get()));
  mix(h, std::size_t(aval.dtype));
  mix_vec(h, aval.shape);
  mix(h, aval.weak_type);
  mix(h, p.hash());
  auto range = table_.equal_range(h);
  for (auto it = range.first; it != range.second; ++it) {
    const Node& n = *it->second;
    if (n.op == op && n.in == in && n.aval == aval && n.p == p) return it->second;
  }
  auto node = std::make_shared<Node>();
  node->op = op;
  node->in = std::move(in);
  node->aval = std::move(aval);
  node->p = std::move(p);
  node->hash = h;
  node->id = next_id_++;
  NodeRef ref = node;
  table_.emplace(h, ref);
  return ref;
}

std::vector<NodeRef> Graph::topo_order() const {
  std::vector<NodeRef> order;
  std::unordered_set<const Node*> seen;
  // Iterative DFS: graphs from long traces are deep.
  std::vector<std::pair<NodeRef, size_t>> stack;
  auto visit = [&](const NodeRef& root) {
    if (seen.count(root.get())) return;
    stack.push_back({root, 0});
    seen.insert(root.get());
    while (!stack.empty()) {
      auto& [n, i] = stack.back();
      if (i < n->in.size()) {
        NodeRef c = n->in[i++];
        if (!seen.count(c.get())) {
          seen.insert(c.get());
          stack.push_back({c, 0});
        }
      } else {
        order.push_back(n);
        stack.pop_back();
      }
    }
  };
  for (auto& p : params) visit(p);
  for (auto& o : outputs) visit(o);
  return order;
}

namespace {

void add_aval(Key& k, const Aval& a) { k.pod(a.dtype).pod(a.weak_type).seq(a.shape); }

void add_params(Key& k, const Params& p) {
  k.seq(p.dims).seq(p.lo).seq(p.hi).seq(p.step);
  k.seq(p.dot.lhs_contract).seq(p.dot.rhs_contract).seq(p.dot.lhs_batch).seq(p.dot.rhs_batch);
  k.pod(p.dtype);
  if (p.literal) {
    k.tag('L').pod(p.literal->dtype).seq(p.literal->shape).raw(p.literal->bytes.data(), p.literal->bytes.size());
  } else {
    k.tag('-');
  }
  if (p.sharding) add_to_key(k, *p.sharding);
  else k.tag('-');
  if (p.mesh) add_to_key(k, *p.mesh);
  else k.tag('-');
  k.seq(p.mesh_axes).pod(p.reduce_op).pod(std::uint64_t(p.pairs.size()));
  for (auto& [a, b] : p.pairs) k.pod(a).pod(b);
}

// Nodes in `order` (operands first), each as op, aval, params and its operands'
// positions in `order`; nodes of `leaf_no` as their input number and aval.
void add_nodes(Key& k, const std::vector<NodeRef>& order, std::unordered_map<const Node*, std::int64_t>& number,
               const std::unordered_map<const Node*, std::int64_t>& leaf_no) {
  for (auto& n : order) {
    auto leaf = leaf_no.find(n.get());
    if (leaf != leaf_no.end()) {
      k.tag('I').pod(leaf->second);
      add_aval(k, n->aval);
    } else {
      k.tag('N').pod(n->op);
      add_aval(k, n->aval);
      add_params(k, n->p);
      k.pod(std::uint64_t(n->in.size()));
      for (auto& x : n->in) k.pod(number.at(x.get()));
    }
    number.emplace(n.get(), std::int64_t(number.size()));
  }
}

}  // namespace

Key fingerprint(const Graph& g) {
  Key k;
  std::unordered_map<const Node*, std::int64_t> number;
  auto order = g.topo_order();
  k.pod(std::uint64_t(order.size()));
  add_nodes(k, order, number, {});
  k.pod(std::uint64_t(g.params.size()));
  for (auto& p : g.params) k.pod(number.at(p.get()));
  k.pod(std::uint64_t(g.outputs.size()));
  for (auto& o : g.outputs) k.pod(number.at(o.get()));
  return k;
}

Key fingerprint(const NodeRef& root, const std::vector<NodeRef>& leaves) {
  std::unordered_map<const Node*, std::int64_t> leaf_no;
  for (size_t i = 0; i < leaves.size(); ++i) leaf_no.emplace(leaves[i].get(), std::int64_t(i));
  // Operands first, not entering leaves (iterative: kernels may be deep).
  std::vector<NodeRef> order;
  std::unordered_set<const Node*> seen{root.get()};
  std::vector<std::pair<NodeRef, size_t>> stack{{root, 0}};
  while (!stack.empty()) {
    auto& [n, i] = stack.back();
    const bool is_leaf = n != root && leaf_no.count(n.get());
    if (!is_leaf && i < n->in.size()) {
      NodeRef c = n->in[i++];
      if (seen.insert(c.get()).second) stack.push_back({c, 0});
    } else {
      order.push_back(n);
      stack.pop_back();
    }
  }
  if (leaf_no.count(root.get())) leaf_no.erase(root.get());
  Key k;
  std::unordered_map<const Node*, std::int64_t> number;
  k.pod(std::uint64_t(order.size()));
  add_nodes(k, order, number, leaf_no);
  return k;
}

namespace {

std::string literal_text(const Literal& l) {
  std::ostringstream os;
  std::int64_t n = numel(l.shape);
  if (!l.shape.empty()) os << '{';
  for (std::int64_t i = 0; i < std::min<std::int64_t>(n, 8); ++i) os << (i ? ", " : "") << l.as_double(i);
  if (n > 8) os << ", ...";
  if (!l.shape.empty()) os << '}';
  return os.str();
}

std::string attrs(const Node& n) {
  std::ostringstream os;
  rules(n.op).print_attrs(n, os);  // each op prints its own (tracer/rules_<family>.cpp)
  return os.str();
}

}  // namespace

std::unordered_map<const Node*, int> value_numbers(const Graph& g) {
  std::unordered_map<const Node*, int> name;
  for (auto& n : g.topo_order()) name.emplace(n.get(), int(name.size()));
  return name;
}

std::string to_text(const Graph& g, const std::unordered_map<const Node*, AxisSharding>* shardings,
                    const std::unordered_map<const Node*, std::string>* notes) {
  std::ostringstream os;
  auto order = g.topo_order();
  std::unordered_map<const Node*, int> name = value_numbers(g);
  os << "func " << g.name << "(";
  for (size_t i = 0; i < g.params.size(); ++i) os << (i ? ", " : "") << '%' << name[g.params[i].get()];
  os << ") {\n";
  for (auto& n : order) {
    os << "  %" << name[n.get()] << " = " << n->aval.str() << ' ' << op_name(n->op) << '(';
    if (n->op == Op::parameter) os << n->p.dims[0];
    if (n->op == Op::constant) os << literal_text(*n->p.literal);
    for (size_t i = 0; i < n->in.size(); ++i) os << (i ? ", " : "") << '%' << name[n->in[i].get()];
    os << ')' << attrs(*n);
    if (shardings) {
      auto it = shardings->find(n.get());
      if (it != shardings->end()) os << "  sharding=" << it->second.spec_str();
    }
    if (notes) {
      auto it = notes->find(n.get());
      if (it != notes->end()) os << "  // " << it->second;
    }
    os << '\n';
  }
  os << "  ROOT (";
  for (size_t i = 0; i < g.outputs.size(); ++i) os << (i ? ", " : "") << '%' << name[g.outputs[i].get()];
  os << ")\n}\n";
  return os.str();
}

void verify(const Graph& g) {
  for (auto& n : g.topo_order()) {
    std::vector<Aval> in;
    for (auto& x : n->in) in.push_back(x->aval);
    Aval want;
    try {
      want = rules(n->op).infer(in, n->p, n->aval);
    } catch (const Error& e) {
      throw InternalError(std::string("verify: node ") + op_name(n->op) + " " + n->aval.str() +
                          " fails its shape rule: " + e.what());
    }
    if (!(want == n->aval))
      throw InternalError(std::string("verify: node ") + op_name(n->op) + " has aval " + n->aval.str() +
                          " but its rule gives " + want.str());
  }
  for (size_t i = 0; i < g.params.size(); ++i)
    if (g.params[i]->op != Op::parameter || g.params[i]->p.dims.at(0) != std::int64_t(i))
      throw InternalError("verify: parameter " + std::to_string(i) + " is misplaced");
}

}  // namespace tessel
