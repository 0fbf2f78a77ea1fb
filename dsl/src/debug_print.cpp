// ts::debug::print and ts::debug::callback (jax.debug.print, .callback): a
// debug_callback node in the trace (tracer/rules_debug.cpp), kept among the
// trace's effects, whose host function formats or hands over the values the
// compiled program computed.
#include <tessel/debug.hpp>

#include <charconv>
#include <complex>
#include <cstring>
#include <iostream>
#include <map>
#include <mutex>
#include <sstream>

#include "dsl/src/array_impl.hpp"
#include "dsl/src/numpy_format.hpp"
#include "dsl/src/trace.hpp"
#include "tessel/core/errors.hpp"
#include "runtime/device.hpp"
#include "tracer/build.hpp"

namespace tessel::debug {

namespace {

using tessel::detail::cat;

// The format string as literal text and argument positions.
struct Piece {
  std::string text;  // literal text (when arg < 0)
  int arg = -1;
};

std::vector<Piece> parse_format(const std::string& fmt, std::size_t nargs) {
  std::vector<Piece> out;
  std::vector<std::string> names;
  std::string lit;
  int next = 0;
  for (std::size_t i = 0; i < fmt.size(); ++i) {
    const char c = fmt[i];
    if (c == '{' && i + 1 < fmt.size() && fmt[i + 1] == '{') {
      lit += '{', ++i;
      continue;
    }
    if (c == '}' && i + 1 < fmt.size() && fmt[i + 1] == '}') {
      lit += '}', ++i;
      continue;
    }
    if (c == '}') throw ValueError(cat("debug::print: single '}' in format string \"", fmt, "\""));
    if (c != '{') {
      lit += c;
      continue;
    }
    const std::size_t close = fmt.find('}', i);
    if (close == std::string::npos) throw ValueError(cat("debug::print: unmatched '{' in format string \"", fmt, "\""));
    const std::string field = fmt.substr(i + 1, close - i - 1);
    if (field.find_first_of(":!{") != std::string::npos)
      throw ValueError(cat("debug::print: format specs and conversions are not supported: {", field, "} in \"", fmt,
                           "\""));
    int arg;
    if (field.empty()) {
      arg = next++;
    } else if (field.find_first_not_of("0123456789") == std::string::npos) {
      arg = std::stoi(field);
    } else {
      auto it = std::find(names.begin(), names.end(), field);
      if (it == names.end()) {
        names.push_back(field);
        arg = next++;
      } else {
        // A name seen before: the argument it took.
        arg = -1;
        for (auto& p : out)
          if (p.text == field && p.arg >= 0) arg = p.arg;
      }
    }
    if (arg < 0 || std::size_t(arg) >= nargs)
      throw ValueError(cat("debug::print: format string \"", fmt, "\" refers to argument ", arg, " but ", nargs,
                           " argument", nargs == 1 ? " was" : "s were", " given"));
    if (!lit.empty()) out.push_back({lit, -1}), lit.clear();
    out.push_back({field, arg});
    i = close;
  }
  if (!lit.empty()) out.push_back({lit, -1});
  return out;
}

// Python's repr of a float (NumPy prints a 0-d array's value so): the
// shortest digits that read back, ".0" on integral values.
template <class T>
std::string float_repr(T v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  std::string s(buf, r.ptr);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

// A value as NumPy's str() prints it: arrays as np.array2string, 0-d
// arrays as their scalar.
std::string value_text(DType dtype, const Shape& shape, const void* data) {
  if (shape.empty()) {
    std::string out;
    visit_dtype(dtype, [&](auto tag) {
      using T = decltype(tag);
      T v;
      std::memcpy(&v, data, sizeof(T));
      if constexpr (std::is_same_v<T, bool>) {
        out = v ? "True" : "False";
      } else if constexpr (std::is_same_v<T, std::complex<float>> || std::is_same_v<T, std::complex<double>>) {
        std::string im = float_repr(v.imag());
        if (im[0] != '-') im = "+" + im;
        if (im.size() > 2 && im.substr(im.size() - 2) == ".0") im.resize(im.size() - 2);
        std::string re = float_repr(v.real());
        if (re.size() > 2 && re.substr(re.size() - 2) == ".0") re.resize(re.size() - 2);
        out = "(" + re + im + "j)";
      } else if constexpr (std::is_floating_point_v<T>) {
        out = float_repr(v);
      } else if constexpr (std::is_integral_v<T>) {
        out = std::to_string(v);
      } else if constexpr (std::is_same_v<T, float16_t>) {
        out = tessel::detail::float16_repr(v);
      } else {
        out = tessel::detail::ml_dtypes_text(static_cast<float>(v));  // bfloat16, float8
      }
    });
    return out;
  }
  const tessel::detail::Array2StringOptions opt = tessel::detail::current_array2string_options();
  const auto shown = tessel::detail::shown_elements(shape, opt);
  return tessel::detail::layout_array(shape, tessel::detail::format_elements(dtype, data, shape, shown, opt.floats),
                                      opt);
}

std::mutex& out_mutex() {
  static std::mutex m;
  return m;
}

// What the compiled program hands the function: complex values arrive as
// their packed real pairs (codegen/complex.cpp), the same bytes.
attr::EffectArg as_traced(const attr::EffectArg& a, DType traced) {
  attr::EffectArg r = a;
  if (is_complex(traced) && !is_complex(a.dtype)) {
    r.dtype = traced;
    if (!r.shape.empty()) r.shape.pop_back();
  }
  return r;
}

std::atomic<std::int64_t> g_next_id{1};

// The first exception a callback raised since the last effects_barrier.
std::mutex g_error_mu;
std::exception_ptr g_error;

// fn, with any exception it raises kept for effects_barrier (and rethrown:
// the program's outputs carry it too).
attr::EffectFn keeping_errors(attr::EffectFn fn) {
  return [fn = std::move(fn)](const std::vector<attr::EffectArg>& args) {
    try {
      fn(args);
    } catch (...) {
      std::lock_guard<std::mutex> lk(g_error_mu);
      if (!g_error) g_error = std::current_exception();
      throw;
    }
  };
}

// The id of a print: the same for the same format and argument dtypes (what
// its function does depends on nothing else), so that retracing a function
// that prints (an eager grad, each call) finds its compiled program again.
std::int64_t print_id(const std::string& fmt, const std::vector<DType>& dtypes) {
  static std::mutex mu;
  static std::map<std::pair<std::string, std::vector<DType>>, std::int64_t> ids;
  std::lock_guard<std::mutex> lk(mu);
  auto [it, fresh] = ids.try_emplace({fmt, dtypes}, 0);
  if (fresh) it->second = g_next_id++;
  return it->second;
}

// Adds a debug_callback node for `fn` (named `id`; 0: a fresh one, as a
// callback's function cannot be compared) to the innermost trace running,
// or returns false when no trace is.
bool traced_callback(const std::vector<Array>& args, attr::EffectFn fn, std::int64_t id = 0) {
  // Staged in the innermost trace of the code running (never hoisted to an
  // outer trace of its arguments: inside a loop body it fires each
  // iteration); inside jit a print of constants fires at run time too.
  auto t = tessel::detail::current_trace();
  if (!t) return false;
  std::vector<NodeRef> nodes;
  for (auto& a : args) nodes.push_back(tessel::detail::node_of(*t, a));
  attr::DebugCallback how;
  how.id = id ? id : g_next_id++;
  // After the trace's previous print or callback: a device runs them in trace order.
  if (t->last_token) nodes.push_back(t->last_token), how.ordered = true;
  how.fn = std::make_shared<const attr::EffectFn>(keeping_errors(std::move(fn)));
  NodeRef node = build::debug_callback(t->table, nodes, std::move(how));
  t->effects.push_back(node);
  t->last_token = node;
  return true;
}

std::vector<attr::EffectArg> host_args(const std::vector<Array>& args, std::vector<std::vector<unsigned char>>& storage) {
  std::vector<attr::EffectArg> out;
  for (auto& a : args) {
    const auto& impl = tessel::detail::impl_of(a);
    storage.emplace_back(std::size_t(numel(impl.shape)) * dtype_size(impl.dtype));
    tessel::detail::gather_to_host(impl, storage.back().data());
    out.push_back(attr::EffectArg{impl.dtype, impl.shape, storage.back().data(), -1});
  }
  return out;
}

}  // namespace

void print_values(const std::string& fmt, const std::vector<Array>& args) {
  const std::vector<Piece> pieces = parse_format(fmt, args.size());
  std::vector<DType> traced;
  for (auto& a : args) traced.push_back(a.dtype());
  attr::EffectFn fn = [pieces, traced](const std::vector<attr::EffectArg>& values) {
    std::string line;
    for (auto& p : pieces) {
      if (p.arg < 0) {
        line += p.text;
        continue;
      }
      const attr::EffectArg v = as_traced(values.at(size_t(p.arg)), traced.at(size_t(p.arg)));
      line += value_text(v.dtype, v.shape, v.data);
    }
    line += '\n';
    std::lock_guard<std::mutex> lk(out_mutex());
    std::cout << line << std::flush;
  };
  if (traced_callback(args, fn, print_id(fmt, traced))) return;
  std::vector<std::vector<unsigned char>> storage;
  fn(host_args(args, storage));
}

void callback_values(std::function<void(const std::vector<Array>&)> f, const std::vector<Array>& args) {
  if (!f) throw ValueError("debug::callback: the function is empty");
  std::vector<DType> traced;
  for (auto& a : args) traced.push_back(a.dtype());
  auto shared = std::make_shared<std::function<void(const std::vector<Array>&)>>(std::move(f));
  attr::EffectFn fn = [shared, traced](const std::vector<attr::EffectArg>& values) {
    std::vector<Array> arrays;
    for (size_t k = 0; k < values.size(); ++k) {
      const attr::EffectArg v = as_traced(values[k], traced.at(k));
      arrays.push_back(tessel::detail::from_host(v.dtype, v.shape, v.data));
    }
    (*shared)(arrays);
  };
  if (traced_callback(args, fn)) return;
  (*shared)(args);  // eager: the arrays themselves, at once
}

}  // namespace tessel::debug

namespace tessel {

void effects_barrier() {
  if (const int dev = rt::current_device(); dev >= 0)
    throw ValueError("effects_barrier on device " + std::to_string(dev) +
                     "'s own thread (inside ts::debug::callback) would wait for itself");
  if (rt::Runtime::started()) rt::Runtime::get().synchronize();
  std::exception_ptr e;
  {
    std::lock_guard<std::mutex> lk(debug::g_error_mu);
    std::swap(e, debug::g_error);
  }
  if (e) std::rethrow_exception(e);
}

}  // namespace tessel

namespace tessel::detail {
std::string numpy_str(DType dtype, const Shape& shape, const void* data) { return debug::value_text(dtype, shape, data); }
}  // namespace tessel::detail
