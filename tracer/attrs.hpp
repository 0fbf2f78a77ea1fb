// Typed per-op attributes.
//
// Each primitive names its attribute struct in the op list (tracer/ops.hpp,
// TESSEL_OPS' last column); a node holds exactly that struct. A struct lists
// its fields once, in `fields()`, and says how it prints (XLA's spelling) in
// `print()`; equality, hashing and the exact cache key of every struct derive
// from `fields()` here, so adding an attribute struct writes none of them.
// Pointer fields (constants' bytes, meshes, shardings) compare and key by
// value, never by address.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <tuple>
#include <utility>
#include <variant>
#include <vector>

#include "tessel/core/dtype.hpp"
#include "tessel/core/key.hpp"
#include "tracer/ops.hpp"
#include "tessel/core/shape.hpp"
#include "tracer/sharding.hpp"

namespace tessel {

// A region: a child graph a node owns (a called function, later loop bodies,
// branches, shard_map bodies). Held in the node's attribute struct, so that
// shape rules see it; compared and keyed by structure (tracer/ir.cpp).
struct Graph;
using GraphRef = std::shared_ptr<const Graph>;

// Host data of a constant, row-major.
struct Literal {
  DType dtype = DType::float32;
  Shape shape;
  std::vector<unsigned char> bytes;
  std::size_t hash() const;
  bool operator==(const Literal&) const = default;
  // The value at flat index i as a double (for printing and folding); the
  // real part of a complex value.
  double as_double(std::int64_t i) const;
  std::complex<double> as_complex(std::int64_t i) const;
  static std::shared_ptr<const Literal> scalar(DType t, double v);
  static std::shared_ptr<const Literal> scalar(DType t, std::complex<double> v);
};
using LiteralRef = std::shared_ptr<const Literal>;

struct DotDims {
  std::vector<std::int64_t> lhs_contract, rhs_contract, lhs_batch, rhs_batch;
  bool operator==(const DotDims&) const = default;
};

// Moving a program onto another mesh (the compile driver's common mesh of
// all its meshes): what the parts of an attribute that name a mesh become.
class MeshRewrite {
 public:
  virtual ~MeshRewrite() = default;
  virtual const MeshRef& mesh() const = 0;  // the new mesh
  // Axes of `from`, as the new mesh names them.
  virtual std::vector<int> axes(const MeshRef& from, const std::vector<int>& axes) const = 0;
  virtual AxisSharding sharding(const AxisSharding& s) const = 0;
};

namespace attr {

// Ops without attributes (elementwise ops, reshape, select, ...).
struct None {
  auto fields() const { return std::tie(); }
  void print(std::ostream&) const {}
};
// parameter: its position among the graph's parameters.
struct Parameter {
  std::int64_t index = 0;
  auto fields() const { return std::tie(index); }
  void print(std::ostream&) const {}  // printed as the operand: parameter(0)
};
// constant: its value.
struct Constant {
  LiteralRef value;
  auto fields() const { return std::tie(value); }
  void print(std::ostream&) const {}  // printed as the operand: constant({1, 2})
};
// iota: the dimension that counts.
struct Iota {
  std::int64_t dimension = 0;
  auto fields() const { return std::tie(dimension); }
  void print(std::ostream& os) const;
};
// broadcast_in_dim (operand dim -> result dim), transpose (the permutation),
// rev (reversed dims), reduce_* (reduced axes).
struct Dimensions {
  std::vector<std::int64_t> dims;
  auto fields() const { return std::tie(dims); }
  void print(std::ostream& os) const;
};
// concatenate, sort: one dimension.
struct Dimension {
  std::int64_t dimension = 0;
  auto fields() const { return std::tie(dimension); }
  void print(std::ostream& os) const;
};
// cumsum, cumprod, cummax, cummin, cumlogsumexp: the scanned dimension, and
// whether the scan runs from its end.
struct Cumulative {
  std::int64_t dimension = 0;
  bool reverse = false;
  auto fields() const { return std::tie(dimension, reverse); }
  void print(std::ostream& os) const;
};
// top_k: how many of the largest elements along the last dim.
struct TopK {
  std::int64_t k = 1;
  auto fields() const { return std::tie(k); }
  void print(std::ostream& os) const;
};
// gather, scatter: indexing along one axis with an integer index array.
// Take form (along=false): the index array's dims stand in for `axis` (the
// gathered result, and scatter's updates, are x.shape[:axis] + idx.shape +
// x.shape[axis+1:]). Along form (take_along_axis): idx has x's rank and at
// each position picks along `axis`. A negative index counts from the end;
// then out of bounds: clip clamps it; fill makes a gather yield JAX's fill
// value (NaN, the lowest signed, the highest unsigned, true) and zero makes
// it yield 0, and both make a scatter drop the update. scatter combines an
// update into its place with `combine`: add, mul, min, max, or select (the
// update replaces it).
enum class IndexMode : std::uint8_t { clip, fill, zero };
struct Indexed {
  std::int64_t axis = 0;
  bool along = false;
  IndexMode mode = IndexMode::clip;
  Op combine = Op::add;
  auto fields() const { return std::tie(axis, along, mode, combine); }
  void print(std::ostream& os) const;
};
// argmax, argmin: the reduced axis and the index dtype.
struct ArgReduce {
  std::int64_t dimension = 0;
  DType index_dtype = DType::int32;
  auto fields() const { return std::tie(dimension, index_dtype); }
  void print(std::ostream& os) const;
};
// Dense linear algebra on the two minor dims of each operand (leading dims
// are a batch), as lax.linalg: cholesky (lower: L with L L^H = a, zeros
// above), triangular_solve(a, b) (op(a) x = b when left_side, else x op(a) =
// b; a's `lower` triangle is read, op = transpose when transpose_a, a unit
// diagonal assumed when unit_diagonal), lu -> (lu, pivots, permutation), qr
// -> (q, r) (full_matrices: q square), eigh -> (v, w) (ascending w, a's
// `lower` triangle read), svd -> (s, u, vh) or (s) without compute_uv.
struct Linalg {
  bool lower = true, left_side = true, transpose_a = false, unit_diagonal = false;
  bool full_matrices = true, compute_uv = true;
  // triangular_solve: op(a) = conj(a) (with transpose_a: a^H), as lax.linalg's conjugate_a.
  bool conjugate_a = false;
  // Set only by codegen's complex expansion (codegen/complex.cpp): the
  // operands and results of a complex dtype are stored as real [..., 2].
  bool packed_complex = false;
  auto fields() const {
    return std::tie(lower, left_side, transpose_a, unit_diagonal, full_matrices, compute_uv, conjugate_a, packed_complex);
  }
  void print(std::ostream& os) const;
};
// fft: a discrete Fourier transform over `axes` (distinct, in any order;
// XLA's takes trailing axes only). kind fft: complex, e^{-2 pi i jk/n};
// ifft: complex, e^{+2 pi i jk/n}, unnormalised (no 1/n: the dsl scales);
// rfft: real to complex, the last of `axes` keeping n/2 + 1 entries; irfft:
// complex to real (unnormalised), the last of `axes` becoming `n` long from
// n/2 + 1 (the imaginary parts of its zero and Nyquist entries ignored).
enum class FftKind : std::uint8_t { fft, ifft, rfft, irfft };
struct Fft {
  FftKind kind = FftKind::fft;
  std::vector<std::int64_t> axes;
  std::int64_t n = 0;  // irfft only
  auto fields() const { return std::tie(kind, axes, n); }
  void print(std::ostream& os) const;
};
// conv (lax.conv_general_dilated, tracer/rules_conv.cpp): per spatial dim
// the window strides, the padding of the dilated input (low, high; negative
// crops) and the input (lhs) and kernel (rhs) dilations; the operands' and
// result's layouts as JAX's ConvDimensionNumbers: lhs_spec = (batch dim,
// feature dim, spatial dims...), rhs_spec = (output feature, input feature,
// spatial...), out_spec = (batch, feature, spatial...), spatial dims in the
// kernel's order; StableHLO's feature and batch groups.
struct Conv {
  std::vector<std::int64_t> strides, pad_lo, pad_hi, lhs_dilation, rhs_dilation;
  std::vector<std::int64_t> lhs_spec, rhs_spec, out_spec;
  std::int64_t feature_group_count = 1, batch_group_count = 1;
  // Made by the transpose for the kernel's cotangent (JAX's
  // _conv_general_dilated_transpose_rhs): its rhs is a cotangent spanning
  // the image, so a spatial dim split over devices is split as a sum over
  // the cotangent's rows, whatever the sizes (tracer/rules_conv.cpp). The
  // same values either way; printed as `kernel_gradient`.
  bool kernel_gradient = false;
  auto fields() const {
    return std::tie(strides, pad_lo, pad_hi, lhs_dilation, rhs_dilation, lhs_spec, rhs_spec, out_spec,
                    feature_group_count, batch_group_count, kernel_gradient);
  }
  void print(std::ostream& os) const;
};
// window_select, select_and_gather_add and select_and_scatter_add (the max
// and min pooling's derivative, tracer/rules_window.cpp): the operand's
// shape (`base`), per dim the window's size and stride and the padding
// (low, high; non-negative) around it; `ge` selects each window's first
// maximum (JAX's select_prim ge_p), else its first minimum (le_p).
// A device's window_select over its tile and its neighbours' border rows
// (the partition rule) also has `offset_dims`: dims whose rows are global
// row (an int32 operand per such dim, after x) + local row, inside x only
// below `extent` (the global size) there.
struct SelectWindow {
  bool ge = true;
  std::vector<std::int64_t> base, window, strides, pad_lo, pad_hi;
  std::vector<std::int64_t> offset_dims, extent;
  auto fields() const { return std::tie(ge, base, window, strides, pad_lo, pad_hi, offset_dims, extent); }
  void print(std::ostream& os) const;
  // Whether dim d is untouched by the window (size 1, stride 1, no padding).
  bool untouched(std::size_t d) const {
    return window[d] == 1 && strides[d] == 1 && pad_lo[d] == 0 && pad_hi[d] == 0;
  }
};
// reduce_window_sum, reduce_window_max, reduce_window_min (pooling,
// tracer/rules_window.cpp): the operand's shape, per dim the window's size
// and stride and the padding (low, high; non-negative; it holds the
// reduction's identity), and, in a device's program, the dims whose rows
// are offset (SelectWindow's offset_dims and extent).
struct ReduceWindow {
  std::vector<std::int64_t> base, window, strides, pad_lo, pad_hi;
  std::vector<std::int64_t> offset_dims, extent;
  auto fields() const { return std::tie(base, window, strides, pad_lo, pad_hi, offset_dims, extent); }
  void print(std::ostream& os) const;
  // The same window as a selection's (its first maximum for ge, else minimum), and back.
  SelectWindow selection(bool ge = true) const {
    return SelectWindow{ge, base, window, strides, pad_lo, pad_hi, offset_dims, extent};
  }
  static ReduceWindow of(const SelectWindow& w) {
    return ReduceWindow{w.base, w.window, w.strides, w.pad_lo, w.pad_hi, w.offset_dims, w.extent};
  }
};
// debug_callback: a host function called at run time with its operands'
// values (ts::debug::print, ts::debug::callback); its result is a bool[]
// token nothing reads (the graph keeps the node among its effects). `id`
// stands for the function in keys and equality (unique per traced call);
// with `every_device` it runs on each device with that device's values
// (inside shard_map), else once, on the launch's first device, with the
// whole values (gathered by the partitioner).
struct EffectArg {
  DType dtype;
  Shape shape;
  const void* data;  // row-major, dtype_size(dtype) bytes per element
  int device;        // the device whose values these are (-1: the reference interpreter)
};
using EffectFn = std::function<void(const std::vector<EffectArg>&)>;
// host_call (ts::pure_callback, ts::ffi::call): a host C++ function run on
// each device's blocks of its operands, writing its results' blocks. `in`
// and `out` are the blocks (row-major); `device` is -1 in the reference
// interpreter. The rule (tracer/rules_host_call.cpp) says how blocks
// compose: each operand and result dim is a factor (operand_factors,
// result_factors: a factor id per dim, -1 for a size-1 dim vmap added); a
// factor of the results stays split as its operands are split, one only
// in operands is contracted (each device's result is a partial sum), and a
// factor listed in `replicated` is gathered whole before the call (a factor
// only in results must be: its size is `sizes`', the block's is whole).
struct HostCallArg {
  DType dtype;
  Shape shape;
  void* data;
  int device;
};
using HostCallFn = std::function<void(const std::vector<HostCallArg>& in, const std::vector<HostCallArg>& out)>;
struct HostCall {
  std::int64_t id = 0;  // stands for fn
  std::string name;     // in messages: "pure_callback", or the ffi call's name
  std::vector<DType> dtypes;  // the results'
  std::vector<Shape> shapes;
  std::vector<std::vector<std::int64_t>> operand_factors, result_factors;
  std::vector<std::int64_t> sizes;  // each factor's (global) size
  std::vector<std::int64_t> replicated;
  std::int64_t vmap_method = 0;  // 0 none, 1 sequential, 2 sequential_unrolled, 3 expand_dims, 4 broadcast_all
  std::shared_ptr<const HostCallFn> fn;  // not a field: `id` stands for it
  auto fields() const {
    return std::tie(id, name, dtypes, shapes, operand_factors, result_factors, sizes, replicated, vmap_method);
  }
  void print(std::ostream& os) const;
};
struct DebugCallback {
  std::int64_t id = 0;
  bool every_device = false;
  // The last operand is the token of the effect this one comes after (so
  // a device runs a trace's effects in trace order); not passed to `fn`.
  bool ordered = false;
  std::shared_ptr<const EffectFn> fn;  // not a field: `id` stands for it
  auto fields() const { return std::tie(id, every_device, ordered); }
  void print(std::ostream& os) const;
};
// threefry2x32: which of the two output words.
struct Word {
  std::int64_t word = 0;
  auto fields() const { return std::tie(word); }
  void print(std::ostream& os) const;
};
struct Slice {
  std::vector<std::int64_t> start, limit, stride;
  auto fields() const { return std::tie(start, limit, stride); }
  void print(std::ostream& os) const;
};
struct Pad {
  std::vector<std::int64_t> low, high, interior;
  auto fields() const { return std::tie(low, high, interior); }
  void print(std::ostream& os) const;
};
struct DynamicSlice {
  Shape sizes;
  auto fields() const { return std::tie(sizes); }
  void print(std::ostream& os) const;
};
struct Dot {
  DotDims dims;
  auto fields() const { return std::tie(dims); }
  void print(std::ostream& os) const;
};
// sharding_constraint: the sharding it pins (global shapes).
struct Constraint {
  std::shared_ptr<const AxisSharding> sharding;
  auto fields() const { return std::tie(sharding); }
  void on_mesh(const MeshRewrite& r) { sharding = std::make_shared<const AxisSharding>(r.sharding(*sharding)); }
  void print(std::ostream& os) const;
};
// get_tuple_element: which element.
struct TupleIndex {
  std::int64_t index = 0;
  auto fields() const { return std::tie(index); }
  void print(std::ostream& os) const;
};
// call: a function applied to the operands; its results are the node's
// (a tuple when it has other than one).
struct Call {
  GraphRef body;
  auto fields() const { return std::tie(body); }
  void print(std::ostream& os) const;  // the body prints below the node
};
// custom_jvp_call (ts::custom_jvp): a call of `fun`, whose derivative is
// not fun's but `jvp`'s: jvp(primals, tangents) -> (results, result
// tangents). Operands listed in `nondiff` get zero tangents.
struct CustomJvp {
  GraphRef fun, jvp;
  std::vector<std::int64_t> nondiff;
  auto fields() const { return std::tie(fun, jvp, nondiff); }
  void print(std::ostream& os) const;
};
// custom_vjp_call (ts::custom_vjp): a call of `fun`; under reverse mode
// fwd(operands) -> (results, residuals) runs instead and bwd(residuals,
// result cotangents) -> operand cotangents gives the gradient.
// bwd is traced with the call, as fwd is; an error it raised is kept
// (bwd_error, and its kind: 1 TypeError, 2 ValueError, 3 ShapeError, 4
// another ts::Error) and raised where JAX raises it: when reverse mode uses
// the rule. bwd is then null.
struct CustomVjp {
  GraphRef fun, fwd, bwd;
  std::vector<std::int64_t> nondiff;
  std::string bwd_error;
  std::int64_t bwd_error_kind = 0;
  auto fields() const { return std::tie(fun, fwd, bwd, nondiff, bwd_error, bwd_error_kind); }
  void print(std::ostream& os) const;
};
// custom_lin: the tangent of a custom_vjp_call's results, linear in its
// operands after the first `residuals` (the tangents of the call's
// operands); only its transpose, bwd, ever runs (JAX's custom_lin).
struct CustomLin {
  GraphRef bwd;
  std::int64_t residuals = 0;
  auto fields() const { return std::tie(bwd, residuals); }
  void print(std::ostream& os) const;
};
// remat_call (ts::remat, jax.checkpoint): a call of `fun` whose
// intermediates reverse mode recomputes from its operands instead of
// keeping them, except those `policy` saves (CheckpointPolicy's kinds:
// 0 nothing, 1 everything, 2 dots, 3 dots without batch dims, 4 the values
// named by checkpoint_name with a name in `names`, 5 those named by
// anything but them). prevent_cse: the recomputation is kept apart from
// the forward pass's values (tracer/rules_remat.cpp).
struct Remat {
  GraphRef fun;
  std::int64_t policy = 0;
  std::vector<std::string> names;
  bool prevent_cse = true;
  auto fields() const { return std::tie(fun, policy, names, prevent_cse); }
  void print(std::ostream& os) const;
};
// remat_lin: the tangent of a remat_call's results. Operands: the call's
// operands x, the values the policy saved, then the tangents of x's
// differentiable operands (`diff`); linear in those tangents. `jvp`
// (x, saved, tangents) -> result tangents is what it is in forward mode;
// `rec` is fun with the saved values as further outputs; the transpose
// recomputes fun from x but for the saved values and pulls the cotangents
// back through it.
struct RematLin {
  GraphRef jvp, rec;
  std::vector<std::int64_t> diff;  // per operand of the call: 1 when it has a tangent operand
  std::int64_t saved = 0;
  bool prevent_cse = true;
  auto fields() const { return std::tie(jvp, rec, diff, saved, prevent_cse); }
  void print(std::ostream& os) const;
};
// checkpoint_name: the identity, naming its value for remat policies.
struct Name {
  std::string name;
  auto fields() const { return std::tie(name); }
  void print(std::ostream& os) const;
};
// shard_map: body runs on every device of `mesh` on its blocks: operand k
// laid out as in_specs[k] (global shapes), result k as out_specs[k] (an axis
// an out_spec leaves out: the blocks are equal over it). Collectives in the
// body run over `mesh`'s axes. `manual`: the mesh axes the body sees
// (all of them unless axis_names chose a subset).
struct ShardMap {
  GraphRef body;
  MeshRef mesh;
  std::vector<AxisSharding> in_specs, out_specs;
  std::vector<int> manual;  // the mesh axes this shard_map makes manual (sorted); the others stay automatic
  bool check_vma = true;
  // The body holds JAX's implicit pvarys as nodes, over every axis (those of
  // enclosing shard_maps too): its transpose takes the body as it is.
  bool explicit_vma = false;
  auto fields() const { return std::tie(body, mesh, in_specs, out_specs, manual, check_vma, explicit_vma); }
  void on_mesh(const MeshRewrite& r) {
    manual = r.axes(mesh, manual);
    for (auto& s : in_specs) s = r.sharding(s);
    for (auto& s : out_specs) s = r.sharding(s);
    mesh = r.mesh();
  }
  void print(std::ostream& os) const;  // the body prints below the node
};
// cond: branches[index] applied to the operands after the index (an int32
// scalar, clamped to the branches); every branch takes and returns the same
// avals. Its results are a tuple (lax.cond / lax.switch).
struct Cond {
  std::vector<GraphRef> branches;
  auto fields() const { return std::tie(branches); }
  void print(std::ostream& os) const;
};
// while_: operands are cond's constants, body's constants, then the carries;
// cond(cond consts, carries) -> bool[], body(body consts, carries) -> carries.
// Its results are the final carries, a tuple (lax.while_loop).
struct While {
  GraphRef cond, body;
  std::int64_t cond_consts = 0, body_consts = 0;
  auto fields() const { return std::tie(cond, body, cond_consts, body_consts); }
  void print(std::ostream& os) const;
};
// scan: operands are constants, carries, then xs (each stacked along a
// leading dim of `length`); body(consts, carries, x slices) -> (carries, y
// slices). Its results, a tuple: the final carries, then each y stacked
// along a new leading dim of `length`. reverse: steps run from the last
// index to the first (lax.scan).
struct Scan {
  GraphRef body;
  std::int64_t length = 0, consts = 0, carries = 0;
  bool reverse = false;
  auto fields() const { return std::tie(body, length, consts, carries, reverse); }
  void print(std::ostream& os) const;
};
// Collectives and axis_index run over `axes` of `mesh`: groups are the
// devices that differ only in those axes' coordinates.
struct AxisIndex {
  MeshRef mesh;
  std::vector<int> axes;
  auto fields() const { return std::tie(mesh, axes); }
  void on_mesh(const MeshRewrite& r) {
    axes = r.axes(mesh, axes);
    mesh = r.mesh();
  }
  void print(std::ostream& os) const;
};
struct AllGather {
  MeshRef mesh;
  std::vector<int> axes;
  std::int64_t dimension = 0;
  auto fields() const { return std::tie(mesh, axes, dimension); }
  void on_mesh(const MeshRewrite& r) {
    axes = r.axes(mesh, axes);
    mesh = r.mesh();
  }
  void print(std::ostream& os) const;
};
// distributed_lu, distributed_cholesky, distributed_triangular_solve: this device's rows of one matrix
// whose `rows` rows are split evenly (the last tile padded) over `axes`,
// factorised by a blocked right-looking algorithm with panels of `panel`
// columns (tracer/linalg_distributed.cpp, codegen/lapack_distributed.cpp).
// distributed_triangular_solve: solves op(a) x = b from the left for the
// triangle (lower) of a matrix split so, blocks of `panel` (its row tile)
// rows, with triangular_solve's flags.
struct RowBlocked {
  MeshRef mesh;
  std::vector<int> axes;
  std::int64_t rows = 0, panel = 0;
  bool packed_complex = false;  // set only by codegen's complex expansion, as Linalg's
  bool lower = true, transpose_a = false, conjugate_a = false, unit_diagonal = false;  // the solve's
  auto fields() const {
    return std::tie(mesh, axes, rows, panel, packed_complex, lower, transpose_a, conjugate_a, unit_diagonal);
  }
  void on_mesh(const MeshRewrite& r) {
    axes = r.axes(mesh, axes);
    mesh = r.mesh();
  }
  void print(std::ostream& os) const;
};
struct AllReduce {
  MeshRef mesh;
  std::vector<int> axes;
  Op reduce_op = Op::add;  // add, max or min
  auto fields() const { return std::tie(mesh, axes, reduce_op); }
  void on_mesh(const MeshRewrite& r) {
    axes = r.axes(mesh, axes);
    mesh = r.mesh();
  }
  void print(std::ostream& os) const;
};
struct ReduceScatter {
  MeshRef mesh;
  std::vector<int> axes;
  std::int64_t dimension = 0;
  Op reduce_op = Op::add;
  auto fields() const { return std::tie(mesh, axes, dimension, reduce_op); }
  void on_mesh(const MeshRewrite& r) {
    axes = r.axes(mesh, axes);
    mesh = r.mesh();
  }
  void print(std::ostream& os) const;
};
struct AllToAll {
  MeshRef mesh;
  std::vector<int> axes;
  std::int64_t split_dimension = 0, concat_dimension = 0;
  auto fields() const { return std::tie(mesh, axes, split_dimension, concat_dimension); }
  void on_mesh(const MeshRewrite& r) {
    axes = r.axes(mesh, axes);
    mesh = r.mesh();
  }
  void print(std::ostream& os) const;
};
// collective_permute: (source, target) positions in the whole mesh.
struct CollectivePermute {
  MeshRef mesh;
  std::vector<std::pair<std::int64_t, std::int64_t>> pairs;
  auto fields() const { return std::tie(mesh, pairs); }
  void on_mesh(const MeshRewrite& r) { mesh = r.mesh(); }  // positions in the whole mesh: the same on the new one
  void print(std::ostream& os) const;
};

// Equality, keys and hashes of single fields; structs go through fields().
namespace field {
template <class T>
bool equal(const T& a, const T& b) {
  return a == b;
}
template <class T>
bool equal(const std::shared_ptr<const T>& a, const std::shared_ptr<const T>& b) {
  return a == b || (a && b && *a == *b);
}
bool equal(const GraphRef& a, const GraphRef& b);  // same structure and bits
inline bool equal(const std::vector<GraphRef>& a, const std::vector<GraphRef>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!equal(a[i], b[i])) return false;
  return true;
}
inline void add(Key& k, std::int64_t v) { k.pod(v); }
inline void add(Key& k, DType v) { k.pod(v); }
inline void add(Key& k, Op v) { k.pod(v); }
inline void add(Key& k, IndexMode v) { k.pod(v); }
inline void add(Key& k, FftKind v) { k.pod(v); }
inline void add(Key& k, int v) { k.pod(v); }
inline void add(Key& k, bool v) { k.pod(v); }
inline void add(Key& k, const std::string& v) { k.str(v); }
inline void add(Key& k, const AxisSharding& s) { add_to_key(k, s); }
inline void add(Key& k, const std::pair<std::int64_t, std::int64_t>& v) { k.pod(v.first).pod(v.second); }
void add(Key& k, const GraphRef& g);  // its fingerprint
template <class T>
void add(Key& k, const std::vector<T>& v) {
  k.pod(std::uint64_t(v.size()));
  for (auto& x : v) add(k, x);
}
inline void add(Key& k, const DotDims& d) {
  add(k, d.lhs_contract), add(k, d.rhs_contract), add(k, d.lhs_batch), add(k, d.rhs_batch);
}
void add(Key& k, const LiteralRef& l);
void add(Key& k, const MeshRef& m);
void add(Key& k, const std::shared_ptr<const AxisSharding>& s);
void add(Key& k, const GraphRef& g);  // its fingerprint
}  // namespace field

template <class A>
bool operator==(const A& a, const A& b)
  requires requires { a.fields(); }
{
  return std::apply(
      [&](const auto&... x) {
        return std::apply([&](const auto&... y) { return (field::equal(x, y) && ...); }, b.fields());
      },
      a.fields());
}

template <class A>
void add_to_key(Key& k, const A& a)
  requires requires { a.fields(); }
{
  std::apply([&](const auto&... x) { (field::add(k, x), ...); }, a.fields());
}

}  // namespace attr

// One node's attributes: the struct its op names.
using AttrVariant =
    std::variant<attr::None, attr::Parameter, attr::Constant, attr::Iota, attr::Dimensions, attr::Dimension,
                 attr::ArgReduce, attr::Word, attr::Slice, attr::Pad, attr::DynamicSlice, attr::Dot, attr::Constraint,
                 attr::TupleIndex, attr::Call, attr::ShardMap, attr::Cond, attr::While, attr::Scan, attr::AxisIndex, attr::AllGather, attr::AllReduce, attr::ReduceScatter,
                 attr::AllToAll, attr::CollectivePermute, attr::Indexed, attr::Linalg, attr::Fft, attr::Conv, attr::SelectWindow, attr::ReduceWindow, attr::DebugCallback, attr::RowBlocked, attr::Cumulative, attr::TopK,
                 attr::CustomJvp, attr::CustomVjp, attr::CustomLin, attr::Remat, attr::RematLin, attr::Name, attr::HostCall>;

class Attrs {
 public:
  Attrs() = default;
  template <class A>
    requires requires(const A& a) { a.fields(); }
  Attrs(A a) : v_(std::move(a)) {}

  // The struct, which must be the one held (InternalError otherwise).
  template <class A>
  const A& as() const {
    if (const A* a = std::get_if<A>(&v_)) return *a;
    mismatch();
  }
  template <class A>
  bool holds() const {
    return std::holds_alternative<A>(v_);
  }
  std::size_t index() const { return v_.index(); }

  bool operator==(const Attrs& o) const;
  void add_to_key(Key& k) const;  // which struct, then its fields
  std::size_t hash() const;
  void print(std::ostream& os) const;

  // The regions among the struct's fields, in order; the same attributes
  // with those regions replaced (the one place passes reach regions through).
  std::vector<GraphRef> regions() const;
  Attrs with_regions(const std::vector<GraphRef>& regions) const;
  // The same attributes moved onto another mesh. Every struct with a field
  // that names a mesh (a MeshRef or a sharding) says how it moves
  // (on_mesh), or does not build.
  Attrs on_mesh(const MeshRewrite& r) const;

 private:
  [[noreturn]] void mismatch() const;
  AttrVariant v_;
};

// The variant index of attribute struct A.
template <class A, std::size_t I = 0>
constexpr std::size_t attr_index() {
  if constexpr (std::is_same_v<std::variant_alternative_t<I, AttrVariant>, A>) return I;
  else return attr_index<A, I + 1>();
}

// The attribute struct op names (its index in AttrVariant).
std::size_t op_attr_index(Op op);

}  // namespace tessel
