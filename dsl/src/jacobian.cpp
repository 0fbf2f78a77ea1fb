// The raveling behind ts::jacfwd and ts::jacrev (tessel/jacobian.hpp).
#include <tessel/jacobian.hpp>

#include <tessel/numpy.hpp>

namespace tessel::detail {

Array ravel_leaves(const std::vector<Array>& leaves, DType dtype) {
  if (leaves.empty()) return zeros({0}, dtype);
  std::vector<Array> flat;
  for (const Array& l : leaves) flat.push_back(reshape(astype(l, dtype), {l.size()}));
  return flat.size() == 1 ? flat[0] : concatenate(flat, 0);
}

std::vector<Array> unravel_leaves(const Array& v, const std::vector<Array>& like) {
  std::vector<Array> out;
  std::int64_t off = 0;
  for (const Array& l : like) {
    out.push_back(astype(reshape(v.index({slice(off, off + l.size())}), l.shape()), l.dtype()));
    off += l.size();
  }
  return out;
}

std::vector<std::vector<Array>> split_jacobian(const Array& jac, const std::vector<Array>& outs,
                                               const std::vector<Array>& args) {
  std::vector<std::vector<Array>> blocks;
  std::int64_t r = 0;
  for (const Array& o : outs) {
    std::vector<Array> row;
    std::int64_t c = 0;
    for (const Array& a : args) {
      Shape s = o.shape();
      s.insert(s.end(), a.shape().begin(), a.shape().end());
      row.push_back(reshape(jac.index({slice(r, r + o.size()), slice(c, c + a.size())}), s));
      c += a.size();
    }
    blocks.push_back(std::move(row));
    r += o.size();
  }
  return blocks;
}

void check_differentiable(const std::vector<Array>& leaves, const char* who, int argnum) {
  for (const Array& l : leaves)
    if (!is_floating(l.dtype()) && !is_complex(l.dtype()))
      throw TypeError(std::string(who) + " requires real- or complex-valued inputs (input dtype that is a sub-dtype of "
                      "np.inexact), but got " + dtype_name(l.dtype()) + " in argument " + std::to_string(argnum) +
                      ". If you want to use integer-valued inputs, use vjp or set allow_int to True.");
}

}  // namespace tessel::detail
