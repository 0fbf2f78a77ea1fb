#include "tracer/attrs.hpp"

#include <algorithm>
#include <string>

#include "tessel/core/errors.hpp"
#include "tracer/ir.hpp"

namespace tessel {

namespace {

void ints(std::ostream& os, const std::vector<std::int64_t>& v) {
  os << '{';
  for (size_t i = 0; i < v.size(); ++i) os << (i ? "," : "") << v[i];
  os << '}';
}

// XLA's spelling: the replica groups of mesh positions that talk.
void replica_groups(std::ostream& os, const MeshRef& mesh, const std::vector<int>& axes) {
  if (!mesh) return;
  os << ", replica_groups={";
  auto groups = collective_groups(*mesh, axes);
  for (size_t g = 0; g < groups.size(); ++g) {
    os << (g ? "," : "") << '{';
    for (size_t k = 0; k < groups[g].size(); ++k) os << (k ? "," : "") << groups[g][k];
    os << '}';
  }
  os << '}';
}

const std::size_t kOpAttrIndex[] = {
#define TESSEL_X(e, text, family, cost, attrs) attr_index<attr::attrs>(),
    TESSEL_OPS(TESSEL_X)
#undef TESSEL_X
};
static_assert(sizeof(kOpAttrIndex) / sizeof(kOpAttrIndex[0]) == kNumOps);

}  // namespace

std::size_t op_attr_index(Op op) { return kOpAttrIndex[int(op)]; }

namespace attr {

void Iota::print(std::ostream& os) const { os << ", iota_dimension=" << dimension; }
void Dimensions::print(std::ostream& os) const { os << ", dimensions=", ints(os, dims); }
void Dimension::print(std::ostream& os) const { os << ", dimensions={" << dimension << '}'; }
void TopK::print(std::ostream& os) const { os << ", k=" << k; }
void Cumulative::print(std::ostream& os) const {
  os << ", dimension=" << dimension;
  if (reverse) os << ", reverse=true";
}
void Indexed::print(std::ostream& os) const {
  static const char* modes[] = {"clip", "fill", "zero"};
  os << ", axis=" << axis << (along ? ", along" : "") << ", mode=" << modes[int(mode)] << ", combine=" << op_name(combine);
}
void Fft::print(std::ostream& os) const {
  static const char* kinds[] = {"FFT", "IFFT", "RFFT", "IRFFT"};
  os << ", fft_type=" << kinds[int(kind)] << ", axes={";
  for (size_t i = 0; i < axes.size(); ++i) os << (i ? "," : "") << axes[i];
  os << '}';
  if (kind == FftKind::irfft) os << ", n=" << n;
}
namespace {
void print_window(std::ostream& os, const std::vector<std::int64_t>& window, const std::vector<std::int64_t>& strides,
                  const std::vector<std::int64_t>& pad_lo, const std::vector<std::int64_t>& pad_hi,
                  const std::vector<std::int64_t>& offset_dims, const std::vector<std::int64_t>& extent) {
  auto xs = [&](const std::vector<std::int64_t>& v) {
    for (std::size_t j = 0; j < v.size(); ++j) os << (j ? "x" : "") << v[j];
  };
  os << ", window={size=";
  xs(window);
  os << " stride=";
  xs(strides);
  os << " pad=";
  for (std::size_t j = 0; j < pad_lo.size(); ++j) os << (j ? "x" : "") << pad_lo[j] << '_' << pad_hi[j];
  os << '}';
  if (!offset_dims.empty()) {
    os << ", offset_dims={";
    for (std::size_t j = 0; j < offset_dims.size(); ++j) os << (j ? "," : "") << offset_dims[j];
    os << "}, extent=";
    xs(extent);
  }
}
}  // namespace
// select={ge|le}, window={size=1x2x2x1 stride=1x2x2x1 pad=0_0x0_1x0_1x0_0}.
void SelectWindow::print(std::ostream& os) const {
  os << ", select=" << (ge ? "ge" : "le");
  print_window(os, window, strides, pad_lo, pad_hi, offset_dims, extent);
}
// window={size=1x2x2x1 stride=1x2x2x1 pad=0_0x0_1x0_1x0_0}.
void ReduceWindow::print(std::ostream& os) const {
  print_window(os, window, strides, pad_lo, pad_hi, offset_dims, extent);
}
// XLA's spelling: window={size=3x3 stride=2x2 pad=1_1x1_1 lhs_dilate=.. rhs_dilate=..}, dim_labels=b01f_01io->b01f.
void Conv::print(std::ostream& os) const {
  const std::size_t k = strides.size();
  auto xs = [&](const std::vector<std::int64_t>& v) {
    for (std::size_t j = 0; j < v.size(); ++j) os << (j ? "x" : "") << v[j];
  };
  os << ", window={stride=";
  xs(strides);
  os << " pad=";
  for (std::size_t j = 0; j < k; ++j) os << (j ? "x" : "") << pad_lo[j] << '_' << pad_hi[j];
  if (std::any_of(lhs_dilation.begin(), lhs_dilation.end(), [](auto d) { return d != 1; })) os << " lhs_dilate=", xs(lhs_dilation);
  if (std::any_of(rhs_dilation.begin(), rhs_dilation.end(), [](auto d) { return d != 1; })) os << " rhs_dilate=", xs(rhs_dilation);
  os << "}, dim_labels=";
  auto labels = [&](const std::vector<std::int64_t>& spec, char a, char b) {
    std::string s(spec.size(), '?');
    for (std::size_t i = 0; i < spec.size(); ++i) s[std::size_t(spec[i])] = i == 0 ? a : i == 1 ? b : char('0' + (i - 2));
    os << s;
  };
  labels(lhs_spec, 'b', 'f');
  os << '_';
  labels(rhs_spec, 'o', 'i');
  os << "->";
  labels(out_spec, 'b', 'f');
  if (feature_group_count != 1) os << ", feature_group_count=" << feature_group_count;
  if (batch_group_count != 1) os << ", batch_group_count=" << batch_group_count;
  if (kernel_gradient) os << ", kernel_gradient";
}
void DebugCallback::print(std::ostream& os) const {
  os << ", callback=" << id << (every_device ? ", every_device" : "") << (ordered ? ", ordered" : "");
}
void ArgReduce::print(std::ostream& os) const {
  os << ", dimensions={" << dimension << '}';  // the index dtype is the result's
}
void Linalg::print(std::ostream& os) const {
  // Only what differs from lax.linalg's defaults.
  if (!lower) os << ", lower=false";
  if (!left_side) os << ", left_side=false";
  if (transpose_a) os << ", transpose_a=true";
  if (unit_diagonal) os << ", unit_diagonal=true";
  if (!full_matrices) os << ", full_matrices=false";
  if (!compute_uv) os << ", compute_uv=false";
  if (conjugate_a) os << ", conjugate_a=true";
  if (packed_complex) os << ", packed_complex=true";
}
void Word::print(std::ostream& os) const { os << ", word=" << word; }
void Slice::print(std::ostream& os) const {
  os << ", slice={";
  for (size_t i = 0; i < start.size(); ++i)
    os << (i ? ", " : "") << '[' << start[i] << ':' << limit[i]
       << (stride[i] != 1 ? ":" + std::to_string(stride[i]) : "") << ']';
  os << '}';
}
void Pad::print(std::ostream& os) const {
  os << ", padding=";
  for (size_t i = 0; i < low.size(); ++i)
    os << (i ? "x" : "") << low[i] << '_' << high[i] << (interior[i] ? "_" + std::to_string(interior[i]) : "");
}
void DynamicSlice::print(std::ostream& os) const { os << ", dynamic_slice_sizes=", ints(os, sizes); }
void Dot::print(std::ostream& os) const {
  os << ", lhs_batch_dims=", ints(os, dims.lhs_batch);
  os << ", lhs_contracting_dims=", ints(os, dims.lhs_contract);
  os << ", rhs_batch_dims=", ints(os, dims.rhs_batch);
  os << ", rhs_contracting_dims=", ints(os, dims.rhs_contract);
}
void Constraint::print(std::ostream& os) const { os << ", sharding=" << sharding->spec_str(); }
void TupleIndex::print(std::ostream& os) const { os << ", index=" << index; }
void ShardMap::print(std::ostream& os) const {
  os << ", mesh=" << (mesh ? mesh->str() : std::string("(none)")) << ", in_specs=(";
  for (size_t i = 0; i < in_specs.size(); ++i) os << (i ? ", " : "") << in_specs[i].spec_str();
  os << "), out_specs=(";
  for (size_t i = 0; i < out_specs.size(); ++i) os << (i ? ", " : "") << out_specs[i].spec_str();
  os << "), manual_axes={";
  for (size_t i = 0; i < manual.size(); ++i) os << (i ? "," : "") << (mesh ? mesh->axes()[size_t(manual[i])].name : "?");
  os << "}, check_vma=" << (check_vma ? "true" : "false") << (explicit_vma ? ", explicit_vma" : "") << ", to_apply=" << (body ? body->name : std::string("(none)"));
}
void Cond::print(std::ostream& os) const {
  os << ", branch_computations={";
  for (size_t i = 0; i < branches.size(); ++i) os << (i ? ", " : "") << (branches[i] ? branches[i]->name : "(none)");
  os << '}';
}
void While::print(std::ostream& os) const {
  os << ", condition=" << (cond ? cond->name : std::string("(none)")) << ", body=" << (body ? body->name : std::string("(none)"))
     << ", cond_consts=" << cond_consts << ", body_consts=" << body_consts;
}
void Scan::print(std::ostream& os) const {
  os << ", length=" << length << ", consts=" << consts << ", carries=" << carries << (reverse ? ", reverse" : "")
     << ", body=" << (body ? body->name : std::string("(none)"));
}
void Call::print(std::ostream& os) const { os << ", to_apply=" << (body ? body->name : std::string("(none)")); }
namespace {
std::string region_name(const GraphRef& g) { return g ? g->name : std::string("(none)"); }
}  // namespace
void CustomJvp::print(std::ostream& os) const {
  os << ", to_apply=" << region_name(fun) << ", jvp=" << region_name(jvp);
  if (!nondiff.empty()) os << ", nondiff=", ints(os, nondiff);
}
void CustomVjp::print(std::ostream& os) const {
  os << ", to_apply=" << region_name(fun) << ", fwd=" << region_name(fwd) << ", bwd=" << region_name(bwd);
  if (!nondiff.empty()) os << ", nondiff=", ints(os, nondiff);
}
void CustomLin::print(std::ostream& os) const { os << ", bwd=" << region_name(bwd) << ", residuals=" << residuals; }
void Remat::print(std::ostream& os) const {
  static const char* kinds[] = {"nothing_saveable", "everything_saveable", "dots_saveable",
                                "dots_with_no_batch_dims_saveable", "save_only_these_names", "save_any_names_but_these"};
  os << ", to_apply=" << region_name(fun) << ", policy=" << (policy >= 0 && policy < 6 ? kinds[policy] : "?");
  if (!names.empty()) {
    os << "{";
    for (size_t i = 0; i < names.size(); ++i) os << (i ? "," : "") << '"' << names[i] << '"';
    os << "}";
  }
  if (!prevent_cse) os << ", prevent_cse=false";
}
void RematLin::print(std::ostream& os) const {
  os << ", jvp=" << region_name(jvp) << ", recompute=" << region_name(rec) << ", saved=" << saved;
}
void HostCall::print(std::ostream& os) const {
  os << ", custom_call_target=\"" << name << "\", id=" << id << ", rule=\"";
  auto spec = [&](const std::vector<std::vector<std::int64_t>>& dims) {
    for (size_t k = 0; k < dims.size(); ++k) {
      os << (k ? ", " : "");
      for (size_t d = 0; d < dims[k].size(); ++d)
        os << (d ? " " : "") << (dims[k][d] < 0 ? std::string("1") : "f" + std::to_string(dims[k][d]));
    }
  };
  spec(operand_factors);
  os << " -> ";
  spec(result_factors);
  os << '"';
  if (!replicated.empty()) os << ", replicated=", ints(os, replicated);
}
void Name::print(std::ostream& os) const { os << ", name=\"" << name << '"'; }
void AxisIndex::print(std::ostream& os) const {
  os << ", axes={";
  for (size_t i = 0; i < axes.size(); ++i) os << (i ? "," : "") << mesh->axes()[axes[i]].name;
  os << '}';
}
void AllGather::print(std::ostream& os) const {
  replica_groups(os, mesh, axes);
  os << ", dimensions={" << dimension << '}';
}
void RowBlocked::print(std::ostream& os) const {
  replica_groups(os, mesh, axes);
  os << ", rows=" << rows << ", panel=" << panel;
  if (packed_complex) os << ", packed_complex";
  if (!lower) os << ", upper";
  if (transpose_a) os << ", transpose_a";
  if (conjugate_a) os << ", conjugate_a";
  if (unit_diagonal) os << ", unit_diagonal";
}
void AllReduce::print(std::ostream& os) const {
  replica_groups(os, mesh, axes);
  os << ", to_apply=" << op_name(reduce_op);
}
void ReduceScatter::print(std::ostream& os) const {
  replica_groups(os, mesh, axes);
  os << ", dimensions={" << dimension << '}' << ", to_apply=" << op_name(reduce_op);
}
void AllToAll::print(std::ostream& os) const {
  replica_groups(os, mesh, axes);
  os << ", split_dimension=" << split_dimension << ", concat_dimension=" << concat_dimension;
}
void CollectivePermute::print(std::ostream& os) const {
  replica_groups(os, mesh, {});
  os << ", source_target_pairs={";
  for (size_t i = 0; i < pairs.size(); ++i) os << (i ? "," : "") << '{' << pairs[i].first << ',' << pairs[i].second << '}';
  os << '}';
}

namespace field {
void add(Key& k, const LiteralRef& l) {
  if (!l) {
    k.tag('-');
    return;
  }
  k.tag('L').pod(l->dtype).seq(l->shape).raw(l->bytes.data(), l->bytes.size());
}
void add(Key& k, const MeshRef& m) {
  if (!m) {
    k.tag('-');
    return;
  }
  k.tag('M');
  add_to_key(k, *m);
}
void add(Key& k, const std::shared_ptr<const AxisSharding>& s) {
  if (!s) {
    k.tag('-');
    return;
  }
  k.tag('S');
  add_to_key(k, *s);
}
}  // namespace field

}  // namespace attr

bool Attrs::operator==(const Attrs& o) const {
  if (v_.index() != o.v_.index()) return false;
  return std::visit(
      [&](const auto& a) {
        using A = std::decay_t<decltype(a)>;
        return a == std::get<A>(o.v_);
      },
      v_);
}

void Attrs::add_to_key(Key& k) const {
  k.pod(std::uint64_t(v_.index()));
  std::visit([&](const auto& a) { attr::add_to_key(k, a); }, v_);
}

std::size_t Attrs::hash() const {
  Key k;
  add_to_key(k);
  return k.hash();
}

void Attrs::print(std::ostream& os) const {
  std::visit([&](const auto& a) { a.print(os); }, v_);
}

std::vector<GraphRef> Attrs::regions() const {
  std::vector<GraphRef> out;
  std::visit(
      [&](const auto& a) {
        std::apply(
            [&](const auto&... f) {
              auto one = [&](const auto& x) {
                // A null region (a custom_vjp's bwd that failed to trace) is none.
                if constexpr (std::is_same_v<std::decay_t<decltype(x)>, GraphRef>)
                  if (x) out.push_back(x);
                if constexpr (std::is_same_v<std::decay_t<decltype(x)>, std::vector<GraphRef>>)
                  out.insert(out.end(), x.begin(), x.end());
              };
              (one(f), ...);
              (void)one;  // structs without fields
            },
            a.fields());
      },
      v_);
  return out;
}

Attrs Attrs::with_regions(const std::vector<GraphRef>& regions) const {
  return std::visit(
      [&](const auto& a) -> Attrs {
        auto copy = a;  // not const: its fields may be assigned through the tie
        size_t k = 0;
        std::apply(
            [&](const auto&... f) {
              auto one = [&](const auto& x) {
                if constexpr (std::is_same_v<std::decay_t<decltype(x)>, GraphRef>)
                  if (x) const_cast<GraphRef&>(x) = regions.at(k++);
                if constexpr (std::is_same_v<std::decay_t<decltype(x)>, std::vector<GraphRef>>)
                  for (auto& r : const_cast<std::vector<GraphRef>&>(x)) r = regions.at(k++);
              };
              (one(f), ...);
              (void)one;  // structs without fields
            },
            copy.fields());
        if (k != regions.size()) throw InternalError("with_regions: wrong number of regions");
        return Attrs(std::move(copy));
      },
      v_);
}

namespace {
template <class F>
constexpr bool names_mesh_field() {
  using T = std::decay_t<F>;
  return std::is_same_v<T, MeshRef> || std::is_same_v<T, AxisSharding> ||
         std::is_same_v<T, std::shared_ptr<const AxisSharding>> || std::is_same_v<T, std::vector<AxisSharding>>;
}
template <class A>
constexpr bool names_mesh() {
  using Fields = decltype(std::declval<const A&>().fields());
  return []<std::size_t... I>(std::index_sequence<I...>) {
    return (names_mesh_field<std::tuple_element_t<I, Fields>>() || ... || false);
  }(std::make_index_sequence<std::tuple_size_v<Fields>>{});
}
}  // namespace

Attrs Attrs::on_mesh(const MeshRewrite& r) const {
  return std::visit(
      [&](const auto& a) -> Attrs {
        using A = std::decay_t<decltype(a)>;
        if constexpr (names_mesh<A>()) {
          static_assert(requires(A& x) { x.on_mesh(r); }, "an attribute struct that names a mesh must say how it moves (on_mesh)");
          A copy = a;
          copy.on_mesh(r);
          return Attrs(std::move(copy));
        } else {
          return *this;
        }
      },
      v_);
}

void Attrs::mismatch() const {
  throw InternalError("a node's attributes are not the struct its op names (variant index " +
                      std::to_string(v_.index()) + ")");
}

}  // namespace tessel
