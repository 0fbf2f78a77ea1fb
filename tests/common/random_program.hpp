// Random programs of 20+ ops over the primitive set (elementwise, reductions,
// dots, reshapes, slices, sharding constraints, loops, branches, scans,
// cumulative reductions and the everyday numpy surface):
// generate() makes one whose ops fit the shapes; replay() runs it with the
// DSL, traced or eager alike. Used by the property test against the
// reference interpreter (tests/e2e) and across processes (tests/mpi).
#pragma once

#include <random>
#include <string>
#include <vector>

#include <tessel/tessel.hpp>

namespace tessel::random_program {

namespace ts = tessel;

enum class K { Unary, Binary, Bcast, Reduce, Transpose, Reshape, Dot, Slice, Concat, Where, Cast, Argmax, Set,
               Constraint, Pad, Flip, Softmax, Loop, Branch, ScanRows, Narrow };

struct Instr {
  K kind;
  int a = 0, b = 0, which = 0, axis = 0;
  bool keepdims = false;
  std::vector<std::int64_t> v1, v2, v3;
  ts::PartitionSpec spec;
};

struct Program {
  std::vector<ts::Shape> inputs;
  std::vector<Instr> code;
  std::vector<int> outputs;
};

inline int pick(std::mt19937& rng, int n) { return int(rng() % unsigned(n)); }

// Generates a program whose ops fit the shapes (simulated here).
inline Program generate(std::mt19937& rng, int n_ops, const std::vector<std::string>& axis_names) {
  Program p;
  std::vector<ts::Shape> pool;
  int n_in = 2 + pick(rng, 2);
  for (int i = 0; i < n_in; ++i) {
    ts::Shape s = {1 + pick(rng, 12), 1 + pick(rng, 12)};
    if (i > 0 && pick(rng, 2)) s = pool[0];
    pool.push_back(s);
    p.inputs.push_back(s);
  }
  auto same_shape = [&](int i) {
    std::vector<int> c;
    for (int j = 0; j < int(pool.size()); ++j)
      if (pool[j] == pool[i]) c.push_back(j);
    return c[pick(rng, int(c.size()))];
  };
  auto random_spec = [&](int rank) {
    std::vector<ts::PartitionSpec::Entry> e(rank, ts::PartitionSpec::Entry(ts::None));
    for (auto& name : axis_names) {
      int d = pick(rng, rank + 1);
      if (d == rank) continue;
      auto axes = e[d].axes();
      axes.push_back(name);
      e[d] = ts::PartitionSpec::Entry::tuple(axes);
    }
    return ts::PartitionSpec::from_entries(e);
  };
  while (int(p.code.size()) < n_ops) {
    Instr in;
    in.a = pick(rng, int(pool.size()));
    const ts::Shape s = pool[in.a];
    const int r = int(s.size());
    ts::Shape out = s;
    in.kind = K(pick(rng, 21));
    switch (in.kind) {
      case K::Unary: in.which = pick(rng, 15); break;
      case K::Binary: in.b = same_shape(in.a); in.which = pick(rng, 6); break;
      case K::Where: in.b = same_shape(in.a); break;
      case K::Bcast: {
        if (r == 0) continue;
        in.axis = pick(rng, r);  // add x's mean over this axis (keepdims) back to x
        break;
      }
      case K::Reduce: {
        if (r == 0) continue;
        in.which = pick(rng, 4);
        in.axis = pick(rng, r);
        in.keepdims = pick(rng, 2);
        if (in.keepdims) out[in.axis] = 1;
        else out.erase(out.begin() + in.axis);
        break;
      }
      case K::Transpose: std::reverse(out.begin(), out.end()); break;
      case K::Reshape: {
        std::int64_t n = ts::numel(s);
        if (r == 1) {
          std::vector<std::int64_t> divs;
          for (std::int64_t d = 1; d <= n; ++d)
            if (n % d == 0) divs.push_back(d);
          std::int64_t d = divs[pick(rng, int(divs.size()))];
          out = {d, n / d};
        } else {
          out = {n};
        }
        in.v1 = out;
        break;
      }
      case K::Dot: {
        if (r != 2) continue;
        // With an array of shape (k, n) if there is one, else x.T.
        in.b = -1;
        for (int j = 0; j < int(pool.size()); ++j)
          if (pool[j].size() == 2 && pool[j][0] == s[1] && pick(rng, 2)) in.b = j;
        out = {s[0], in.b >= 0 ? pool[in.b][1] : s[0]};
        break;
      }
      case K::Slice: {
        for (int d = 0; d < r; ++d) {
          std::int64_t lo = pick(rng, int(s[d])), hi = lo + 1 + pick(rng, int(s[d] - lo));
          std::int64_t step = 1 + pick(rng, 2);
          in.v1.push_back(lo), in.v2.push_back(hi), in.v3.push_back(step);
          out[d] = ts::ceil_div(hi - lo, step);
        }
        break;
      }
      case K::Concat: {
        if (r == 0) continue;
        in.b = same_shape(in.a);
        in.axis = pick(rng, r);
        out[in.axis] *= 2;
        break;
      }
      case K::Cast: break;
      case K::Narrow: in.which = pick(rng, 6); break;
      case K::Argmax: {
        if (r == 0) continue;
        in.axis = pick(rng, r);
        out.erase(out.begin() + in.axis);
        break;
      }
      case K::Set: {
        if (r == 0) continue;
        for (int d = 0; d < r; ++d) {
          std::int64_t lo = pick(rng, int(s[d]));
          in.v1.push_back(lo), in.v2.push_back(lo + 1 + pick(rng, int(s[d] - lo)));
        }
        break;
      }
      case K::Constraint: in.spec = random_spec(r); break;
      case K::Pad: {
        for (int d = 0; d < r; ++d) {
          in.v1.push_back(pick(rng, 3)), in.v2.push_back(pick(rng, 3));
          out[d] += in.v1.back() + in.v2.back();
        }
        break;
      }
      case K::Flip: break;
      case K::Softmax: if (r == 0) continue; break;
      case K::Loop: {
        // fori_loop of 1..3 steps: x scaled, plus its mean over an axis.
        if (r == 0) continue;
        in.which = 1 + pick(rng, 3);
        in.axis = pick(rng, r);
        break;
      }
      case K::Branch: in.b = same_shape(in.a); in.which = pick(rng, 3); break;
      case K::ScanRows: {
        // Over x's leading axis: carry a row, stack the carries.
        if (r == 0) continue;
        in.which = pick(rng, 2);  // reverse
        break;
      }
    }
    p.code.push_back(in);
    pool.push_back(out);
  }
  int n = int(pool.size());
  p.outputs = {n - 1, n - 2, n - 3};
  return p;
}

// Replays a program with the DSL (traced or eager alike).
inline std::vector<ts::Array> replay(const Program& p, const std::vector<ts::Array>& inputs, const ts::Mesh& mesh) {
  std::vector<ts::Array> pool = inputs;
  for (auto& in : p.code) {
    const ts::Array& x = pool[in.a];
    ts::Array y;
    switch (in.kind) {
      case K::Unary:
        switch (in.which) {
          case 0: y = ts::sin(x); break;
          case 1: y = ts::cos(x); break;
          case 2: y = ts::exp(ts::tanh(x)); break;
          case 3: y = ts::log(ts::abs(x) + 1.0); break;
          case 4: y = ts::sqrt(ts::abs(x)); break;
          case 5: y = -x; break;
          case 6: y = ts::nn::sigmoid(x); break;
          case 7: y = ts::floor(x * 3.0) / 3.0; break;
          case 8: y = ts::square(ts::tanh(x)); break;
          // The everyday surface: scans (along a maybe-split axis), rolls, and compositions.
          case 9: y = x.ndim() ? ts::lax::cumsum(x * 0.25, 0) : ts::sinh(x); break;
          case 10: y = x.ndim() ? ts::lax::cummax(x, x.ndim() - 1, true) : ts::cosh(x * 0.5); break;
          case 11: y = x.ndim() ? ts::lax::cumlogsumexp(x, 0) : ts::nn::silu(x); break;
          case 12: y = x.ndim() ? ts::roll(x, 1, 0) : ts::nn::softplus(x); break;
          case 13: y = ts::logaddexp(x, x * 0.5) + ts::stop_gradient(x); break;
          default: y = x.ndim() ? ts::lax::cumprod(ts::tanh(x) * 0.5 + 1.0, x.ndim() - 1) : ts::arcsinh(x); break;
        }
        break;
      case K::Binary: {
        const ts::Array& b = pool[in.b];
        switch (in.which) {
          case 0: y = x + b; break;
          case 1: y = x - b; break;
          case 2: y = x * b; break;
          case 3: y = x / (ts::abs(b) + 1.0); break;
          case 4: y = ts::maximum(x, b); break;
          default: y = ts::minimum(x, b); break;
        }
        break;
      }
      case K::Where: y = ts::where(x > pool[in.b], x, pool[in.b]); break;
      case K::Bcast: y = x - ts::mean(x, in.axis, true); break;
      case K::Reduce:
        switch (in.which) {
          case 0: y = ts::sum(x, in.axis, in.keepdims); break;
          case 1: y = ts::max(x, in.axis, in.keepdims); break;
          case 2: y = ts::min(x, in.axis, in.keepdims); break;
          default: y = ts::mean(x, in.axis, in.keepdims); break;
        }
        break;
      case K::Transpose: y = ts::transpose(x); break;
      case K::Reshape: y = x.reshape(in.v1); break;
      case K::Dot: y = ts::dot(x, in.b >= 0 ? pool[in.b] : x.T()) * 0.25; break;
      case K::Slice: {
        std::vector<ts::IndexItem> items;
        for (size_t d = 0; d < in.v1.size(); ++d) items.push_back(ts::slice(in.v1[d], in.v2[d], in.v3[d]));
        y = x.index(items);
        break;
      }
      case K::Concat: y = ts::concatenate({x, pool[in.b]}, in.axis); break;
      case K::Cast: y = ts::astype(ts::astype(x * 4.0, ts::int32), ts::float32) * 0.25; break;
      case K::Narrow: {
        // Arithmetic in a 16- or 8-bit dtype (rounded, or wrapping, at each op), back to float32.
        static const ts::DType narrow[] = {ts::bfloat16, ts::float16, ts::float8_e4m3fn, ts::float8_e5m2, ts::int8, ts::uint16};
        const ts::DType t = narrow[in.which];
        if (ts::is_floating(t)) {
          ts::Array n = ts::astype(x, t);
          y = ts::astype(n * n - n * 0.5 + ts::max(n), ts::float32);
        } else {
          ts::Array n = ts::astype(x * 8.0, t);
          y = ts::astype(n * n + n, ts::float32) * 0.125;
        }
        break;
      }
      case K::Argmax: y = ts::astype(ts::argmax(x, in.axis), ts::float32); break;
      case K::Set: {
        std::vector<ts::IndexItem> items;
        for (size_t d = 0; d < in.v1.size(); ++d) items.push_back(ts::slice(in.v1[d], in.v2[d]));
        y = x.at(items).set(0.5);
        break;
      }
      case K::Constraint: y = ts::with_sharding_constraint(x, ts::NamedSharding(mesh, in.spec)); break;
      case K::Pad: {
        std::vector<std::pair<std::int64_t, std::int64_t>> w;
        for (size_t d = 0; d < in.v1.size(); ++d) w.push_back({in.v1[d], in.v2[d]});
        y = ts::pad(x, w, -1.0);
        break;
      }
      case K::Flip: y = ts::flip(x); break;
      case K::Softmax: y = ts::nn::softmax(x, -1); break;
      case K::Loop: {
        const int axis = in.axis;
        y = ts::lax::fori_loop(0, in.which, [&](ts::Array i, ts::Array v) {
          return v * 0.5 + ts::mean(v, axis, true) * 0.25 + i.astype(ts::float32) * 0.125;
        }, x);
        break;
      }
      case K::Branch: {
        const ts::Array& b = pool[in.b];
        auto pred = in.which == 0 ? ts::sum(x) > ts::sum(b) : in.which == 1 ? ts::max(x) > 0.5 : ts::min(b) > 0.0;
        y = ts::lax::cond(pred, [](ts::Array u, ts::Array w) { return ts::sin(u) * w; },
                          [](ts::Array u, ts::Array w) { return u - ts::max(w); }, x, b);
        break;
      }
      case K::ScanRows: {
        ts::lax::ScanOptions opt;
        opt.reverse = in.which == 1;
        auto rows = ts::lax::scan([](ts::Array c, ts::Array row) { return std::pair{ts::tanh(c + row), c * 0.5 + row}; },
                                  ts::zeros_like(x.index({0})), x, opt);
        y = rows.second;
        break;
      }
    }
    pool.push_back(y);
  }
  return {pool[p.outputs[0]], pool[p.outputs[1]], pool[p.outputs[2]]};
}

}  // namespace tessel::random_program
