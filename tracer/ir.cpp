#include "tracer/ir.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <cstring>
#include <functional>
#include <sstream>
#include <unordered_set>

#include "tessel/core/errors.hpp"
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
    case DType::complex64: return "c64";
    case DType::complex128: return "c128";
    case DType::bfloat16: return "bf16";
    case DType::float16: return "f16";
    case DType::int8: return "s8";
    case DType::uint8: return "u8";
    case DType::int16: return "s16";
    case DType::uint16: return "u16";
    case DType::uint64: return "u64";
    case DType::float8_e4m3fn: return "f8e4m3fn";
    case DType::float8_e5m2: return "f8e5m2";
    case DType::float8_e8m0fnu: return "f8e8m0fnu";
    case DType::float4_e2m1fn: return "f4e2m1fn";
  }
  __builtin_unreachable();
}

}  // namespace

Aval Aval::make_tuple(std::vector<Aval> elements) {
  Aval a;
  a.tuple = true;
  a.elements = std::move(elements);
  return a;
}

std::string Aval::str() const {
  std::ostringstream os;
  if (tuple) {
    os << '(';
    for (size_t i = 0; i < elements.size(); ++i) os << (i ? ", " : "") << elements[i].str();
    os << ')';
    return os.str();
  }
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

double Literal::as_double(std::int64_t i) const { return as_complex(i).real(); }

std::complex<double> Literal::as_complex(std::int64_t i) const {
  return visit_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    T v;
    std::memcpy(&v, bytes.data() + std::size_t(i) * sizeof(T), sizeof(T));
    if constexpr (is_complex_v<T>) return std::complex<double>(v);
    else return std::complex<double>(double(v));
  });
}

std::shared_ptr<const Literal> Literal::scalar(DType t, std::complex<double> v) {
  if (!is_complex(t)) return scalar(t, v.real());
  auto l = std::make_shared<Literal>();
  l->dtype = t;
  l->bytes.resize(dtype_size(t));
  visit_dtype(t, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (is_complex_v<T>) {
      T x(typename T::value_type(v.real()), typename T::value_type(v.imag()));
      std::memcpy(l->bytes.data(), &x, sizeof(T));
    }
  });
  return l;
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

NodeRef NodeTable::make(Op op, std::vector<NodeRef> in, Aval aval, Attrs attrs) {
  if (aval.tuple) {
    for (auto& e : aval.elements) check_shape(e.shape, e.dtype, op_name(op));
  } else {
    check_shape(aval.shape, aval.dtype, op_name(op));
  }
  if (attrs.index() != op_attr_index(op))
    throw InternalError(std::string(op_name(op)) + " built with another op's attribute struct");
  std::size_t h = std::size_t(op);
  for (auto& x : in) mix(h, std::hash<const void*>()(x.get()));
  mix(h, std::size_t(aval.dtype));
  mix_vec(h, aval.shape);
  mix(h, aval.weak_type);
  mix(h, aval.tuple);
  mix(h, aval.elements.size());
  mix(h, attrs.hash());
  auto range = table_.equal_range(h);
  for (auto it = range.first; it != range.second; ++it) {
    const Node& n = *it->second;
    if (n.op == op && n.in == in && n.aval == aval && n.attrs == attrs) return it->second;
  }
  auto node = std::make_shared<Node>();
  node->op = op;
  node->in = std::move(in);
  node->aval = std::move(aval);
  node->attrs = std::move(attrs);
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
  for (auto& e : effects) visit(e);
  for (auto& o : outputs) visit(o);
  return order;
}

namespace {

void add_aval(Key& k, const Aval& a) {
  k.pod(a.dtype).pod(a.weak_type).seq(a.shape).pod(a.tuple).pod(std::uint64_t(a.elements.size()));
  for (auto& e : a.elements) add_aval(k, e);
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
      n->attrs.add_to_key(k);
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
  k.pod(std::uint64_t(g.effects.size()));
  for (auto& e : g.effects) k.pod(number.at(e.get()));
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
  for (std::int64_t i = 0; i < std::min<std::int64_t>(n, 8); ++i) {
    os << (i ? ", " : "");
    const std::complex<double> z = l.as_complex(i);
    if (is_complex(l.dtype)) os << '(' << z.real() << (std::signbit(z.imag()) ? "" : "+") << z.imag() << "j)";
    else os << z.real();
  }
  if (n > 8) os << ", ...";
  if (!l.shape.empty()) os << '}';
  return os.str();
}

std::string attrs(const Node& n) {
  std::ostringstream os;
  n.attrs.print(os);  // each attribute struct prints itself
  return os.str();
}

}  // namespace

std::unordered_map<const Node*, int> value_numbers(const Graph& g) {
  std::unordered_map<const Node*, int> name;
  for (auto& n : g.topo_order()) name.emplace(n.get(), int(name.size()));
  return name;
}

namespace {

void print_graph(std::ostream& os, const Graph& g, const std::string& indent,
                 const std::unordered_map<const Node*, AxisSharding>* shardings,
                 const std::unordered_map<const Node*, std::string>* notes) {
  auto order = g.topo_order();
  std::unordered_map<const Node*, int> name = value_numbers(g);
  os << indent << "func " << g.name << "(";
  for (size_t i = 0; i < g.params.size(); ++i) os << (i ? ", " : "") << '%' << name[g.params[i].get()];
  os << ") {\n";
  for (auto& n : order) {
    os << indent << "  %" << name[n.get()] << " = " << n->aval.str() << ' ' << op_name(n->op) << '(';
    if (n->op == Op::parameter) os << n->attr<attr::Parameter>().index;
    if (n->op == Op::constant) os << literal_text(*n->attr<attr::Constant>().value);
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
    // Regions print below their node, indented (their values numbered apart).
    for (auto& r : n->regions()) print_graph(os, *r, indent + "    ", nullptr, nullptr);
  }
  os << indent << "  ROOT (";
  for (size_t i = 0; i < g.outputs.size(); ++i) os << (i ? ", " : "") << '%' << name[g.outputs[i].get()];
  os << ")";
  if (!g.effects.empty()) {
    os << " EFFECTS (";
    for (size_t i = 0; i < g.effects.size(); ++i) os << (i ? ", " : "") << '%' << name[g.effects[i].get()];
    os << ")";
  }
  os << "\n" << indent << "}\n";
}

}  // namespace

void for_each_graph(const Graph& g, const std::function<void(const Graph&)>& fn) {
  std::vector<const Graph*> pending{&g};
  while (!pending.empty()) {
    const Graph* x = pending.back();
    pending.pop_back();
    fn(*x);
    std::vector<const Graph*> children;
    for (auto& n : x->topo_order())
      for (auto& r : n->regions()) children.push_back(r.get());
    pending.insert(pending.end(), children.rbegin(), children.rend());
  }
}

std::string to_text(const Graph& g, const std::unordered_map<const Node*, AxisSharding>* shardings,
                    const std::unordered_map<const Node*, std::string>* notes) {
  std::ostringstream os;
  print_graph(os, g, "", shardings, notes);
  return os.str();
}

namespace {
void verify_one(const Graph& g) {
  for (auto& n : g.topo_order()) {
    if (n->attrs.index() != op_attr_index(n->op))
      throw InternalError(std::string("verify: node ") + op_name(n->op) + " holds another op's attribute struct");
    std::vector<Aval> in;
    for (auto& x : n->in) in.push_back(x->aval);
    Aval want;
    try {
      want = rules(n->op).infer(in, n->attrs, n->aval);
    } catch (const Error& e) {
      throw InternalError(std::string("verify: node ") + op_name(n->op) + " " + n->aval.str() +
                          " fails its shape rule: " + e.what());
    }
    if (!(want == n->aval))
      throw InternalError(std::string("verify: node ") + op_name(n->op) + " has aval " + n->aval.str() +
                          " but its rule gives " + want.str());
  }
  for (size_t i = 0; i < g.params.size(); ++i)
    if (g.params[i]->op != Op::parameter || g.params[i]->attr<attr::Parameter>().index != std::int64_t(i))
      throw InternalError("verify: parameter " + std::to_string(i) + " is misplaced");
}
}  // namespace

void verify(const Graph& g) { for_each_graph(g, verify_one); }

namespace attr::field {
bool equal(const GraphRef& a, const GraphRef& b) {
  return a == b || (a && b && fingerprint(*a) == fingerprint(*b));
}
void add(Key& k, const GraphRef& g) {
  if (!g) {
    k.tag('-');
    return;
  }
  k.tag('G').key(fingerprint(*g));
}
}  // namespace attr::field

}  // namespace tessel
