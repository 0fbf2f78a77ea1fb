"""Writes tests/data/numpy/surface.json: NumPy/SciPy reference values for the
NumPy surface (elementwise, nan-reductions, scans, shape functions), jax.nn's
activations and jax.scipy.special's functions, read by
tests/dsl/surface_ref_test.cpp (no Python at test time); and
tests/data/numpy/surface2.json: sorting, searching, counting, quantiles,
unique/nonzero and lax's sort, top_k, associative_scan and reduce, read by
tests/dsl/surface_ref2_test.cpp (described at its section, below); and
tests/data/numpy/surface3.json: the rest of "more of jax.numpy" (aliases,
creation and index helpers, windows, polynomials, statistics, splits, set
functions, ...), read by tests/dsl/surface_ref3_test.cpp (described at its
section, at the end).

  /usr/bin/python3 tools/numpy_reference.py tests/data/numpy/surface.json [tests/data/numpy/surface2.json [tests/data/numpy/surface3.json]]

(the second and third paths default to surface2.json and surface3.json
beside the first).

Needs only NumPy and SciPy (Debian: python3-numpy python3-scipy); the output
is deterministic (fixed inputs, no random numbers).

Encoding of non-finite numbers: JSON has no NaN or infinities, so every NaN
is written as the string "nan" and the infinities as the strings "inf" and
"-inf" (never JSON null). Booleans are JSON true/false, integers JSON
integers. Every array is {"values": [row-major, flattened], "shape": [...],
"dtype": "float32" | "float64" | "bool" | "int32"}.

"cases": forward checks. Inputs are float32 values (every input is rounded
to float32 first, so the C++ test builds exactly the same numbers); the
reference is computed in float64 from those values and written unrounded,
except that a finite float64 result beyond float32's range is written as an
infinity (what a float32 computation gives). "expected.dtype" is the dtype
JAX gives for float32 inputs (float32, bool for the predicates, int32 for
count_nonzero). "tol" is the mixed tolerance the test uses,
|got - want| <= tol * (1 + |want|) (tests/common/op_check.hpp); 0 means
exact (data movement and selection).

"grad_cases": gradient checks in float64. "expected_grad" is the gradient of
sum(f(x)) with respect to each input, by central differences of the float64
NumPy/SciPy function, (f(x+h) - f(x-h)) / 2h with h = 1e-6, one element at a
time; "expected_value" is f(x) itself in float64. Inputs keep away from the
points where a function is not differentiable.

"kwargs" are the arguments the C++ test passes (axis: null means none/all).
"op" names the function (the C++ test has one lambda per op and fails on an
op it does not know, or on a lambda no case uses); "group" names the
TEST_CASE that runs the case (elementwise, reductions, scans, shapes, nn,
special).
"""
import json
import math
import os
import sys
import warnings

import numpy as np
import scipy.special as sp

F32_MAX = float(np.finfo(np.float32).max)
NAN, INF = float("nan"), float("inf")

EXACT = 0.0     # data movement, selection, comparisons: bit-exact
SIMPLE = 2e-5   # arithmetic, sums, products, sqrt
TRANS = 1e-4    # transcendental functions


def f32(values, shape=None):
    """float32-rounded values as a float64 array (what the C++ side holds)."""
    a = np.asarray(values, dtype=np.float32).astype(np.float64)
    return a.reshape(shape) if shape is not None else a


def enc(v):
    v = float(v)
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return v


def enc_array(a, dtype):
    a = np.asarray(a)
    if dtype == "bool":
        vals = [bool(v) for v in a.ravel()]
    elif dtype == "int32":
        vals = [int(v) for v in a.ravel()]
    else:
        vals = [enc(v) for v in a.astype(np.float64).ravel()]
    return {"values": vals, "shape": list(a.shape), "dtype": dtype}


def as_float32_result(a):
    """Finite float64 results past float32's range overflow to +-inf."""
    a = np.asarray(a, dtype=np.float64).copy()
    big = np.isfinite(a) & (np.abs(a) > F32_MAX)
    a[big] = np.sign(a[big]) * np.inf
    return a


cases = []
names = set()

REDUCTIONS = {"nansum", "nanmean", "nanmax", "nanmin", "nanprod", "ptp", "nanvar", "nanstd", "count_nonzero"}
SCANS = {"cumsum", "cumprod", "cummax", "cummin", "cumlogsumexp"}
SHAPES = {"roll", "diff", "repeat", "tile", "meshgrid", "diag", "diagonal", "trace", "hstack", "vstack", "column_stack",
          "dstack", "moveaxis", "cross", "kron", "rot90", "fliplr", "flipud", "append"}


def group_of(op):
    """The TEST_CASE of surface_ref_test.cpp that runs the case."""
    if op.startswith("nn."):
        return "nn"
    if op.startswith("special."):
        return "special"
    return "reductions" if op in REDUCTIONS else "scans" if op in SCANS else "shapes" if op in SHAPES else "elementwise"


def case(name, op, inputs, expected, kwargs=None, tol=TRANS, dtype="float32", source=""):
    assert name not in names, name
    names.add(name)
    if dtype == "float32":
        expected = as_float32_result(expected)
    for x in inputs:  # inputs must be float32 values already
        assert np.array_equal(np.asarray(x, np.float64), f32(x), equal_nan=True)
    cases.append({
        "name": name,
        "op": op,
        "group": group_of(op),
        "source": source,
        "inputs": [enc_array(x, "float32") for x in inputs],
        "kwargs": kwargs or {},
        "expected": enc_array(expected, dtype),
        "tol": tol,
    })


# ------------------------------------------------------------------ inputs
# A [7, 5] matrix of dyadic values (exact in float32): negatives, zeros.
X = f32([[1.5, -2.25, 0.0, 3.0, -0.5],
         [-1.0, 0.75, 2.5, -3.5, 1.25],
         [0.0, 0.0, -0.125, 4.0, -2.0],
         [2.0, -1.5, 1.0, 0.5, -0.75],
         [-4.0, 3.25, -0.25, 1.75, 0.375],
         [0.625, -2.75, 3.5, -1.25, 2.25],
         [-0.875, 1.125, -3.0, 0.25, -1.625]])
# The same with NaNs: row 3 all NaN, and three more.
XN = X.copy()
XN[3, :] = NAN
XN[0, 1] = XN[5, 4] = XN[6, 0] = NAN
# A [7, 3, 4] array for the axis-taking shape functions.
X3 = f32((np.arange(84).reshape(7, 3, 4) * 0.5) - 20.0)
# A [13] vector.
V13 = f32([3.0, -1.5, 0.0, 2.25, -4.0, 5.5, 1.0, -0.25, 0.0, 7.0, -2.5, 0.5, 6.0])


def unary(name, fn, x, tol=TRANS, op=None, dtype="float32", source="", kwargs=None):
    x = f32(x)
    with np.errstate(all="ignore"):
        y = fn(x)
    case(name, op or name, [x], y, kwargs, tol, dtype, source or f"np/sp.{name}")


def binary(name, fn, a, b, tol=TRANS, op=None, source="", kwargs=None):
    a, b = f32(a), f32(b)
    with np.errstate(all="ignore"):
        y = fn(a, b)
    case(name, op or name, [a, b], y, kwargs, tol, "float32", source or f"np/sp.{name}")


# ------------------------------------------------------------------ elementwise, one array
unary("sinh", np.sinh, [-100, -88, -10, -2.5, -1, -1e-3, 0, 1e-3, 0.5, 2.5, 10, 88, 100, INF, -INF, NAN])
unary("cosh", np.cosh, [-100, -88, -10, -2.5, -1, -1e-3, 0, 1e-3, 0.5, 2.5, 10, 88, 100, INF, -INF, NAN])
unary("arcsin", np.arcsin, [-1, -0.999, -0.5, -1e-4, 0, 1e-4, 0.3, 0.5, 0.999, 1, 1.5, -2, NAN, INF])
unary("arccos", np.arccos, [-1, -0.999, -0.5, -1e-4, 0, 1e-4, 0.3, 0.5, 0.999, 1, 1.5, -2, NAN, INF])
unary("arctan", np.arctan, [-INF, -1e6, -10, -1, -0.5, -1e-4, 0, 1e-4, 0.5, 1, 10, 1e6, INF, NAN])
unary("arcsinh", np.arcsinh, [-INF, -1e4, -10, -1, -0.5, -1e-4, 0, 1e-4, 0.5, 1, 10, 1e4, INF, NAN])
unary("arccosh", np.arccosh, [1, 1.0001, 1.5, 2, 10, 1e4, INF, 0.999, 0.5, 0, -1, -INF, NAN])
unary("arctanh", np.arctanh, [-1, -0.999, -0.5, -1e-4, 0, 1e-4, 0.5, 0.999, 1, 1.5, -2, NAN, INF])
unary("log2", np.log2, [0, -1, 1e-30, 0.1, 0.5, 1, 2, 3, 1024, 1e30, INF, -INF, NAN])
unary("log10", np.log10, [0, -1, 1e-30, 0.1, 0.5, 1, 2, 3, 1000, 1e30, INF, -INF, NAN])
unary("exp2", np.exp2, [-INF, -150, -10, -1, -0.5, 0, 0.5, 1, 10, 127, 129, INF, NAN])
unary("trunc", np.trunc, [-2.7, -2.5, -0.5, 0, 0.5, 1.5, 2.5, 3.7, -1e10, 1e10, INF, -INF, NAN], tol=EXACT)
unary("cbrt", np.cbrt, [-27, -8, -1, -1e-3, 0, 1e-6, 0.125, 1, 2, 27, 1e30, INF, -INF, NAN])
unary("deg2rad", np.deg2rad, [-720, -180, -90, -1, 0, 1, 45, 90, 180, 360, INF, -INF, NAN], tol=SIMPLE)
unary("rad2deg", np.rad2deg, [-10, -math.pi, -1, -1e-3, 0, 1e-3, 0.5, 1, math.pi, 100, INF, -INF, NAN], tol=SIMPLE)
PRED_IN = [-INF, -1e30, -1, -0.0, 0, 1e-30, 1, 1e30, INF, NAN, F32_MAX, -F32_MAX, 2]
unary("isinf", np.isinf, PRED_IN, tol=EXACT, dtype="bool")
unary("isposinf", np.isposinf, PRED_IN, tol=EXACT, dtype="bool")
unary("isneginf", np.isneginf, PRED_IN, tol=EXACT, dtype="bool")
# signbit of -0.0 is true; the NaN here is a positive (quiet) NaN, so false.
unary("signbit", np.signbit, PRED_IN, tol=EXACT, dtype="bool")
unary("fabs", np.fabs, PRED_IN, tol=EXACT)
# np.sinc and jnp.sinc: the normalized sin(pi x) / (pi x), 1 at 0.
unary("sinc", np.sinc, [-3.5, -2, -1, -0.5, -1e-4, 0, 1e-4, 0.25, 0.5, 1, 1.5, 2.5, 3, NAN, INF])

NTN_IN = [NAN, INF, -INF, 0, -1.5, 2.5, 1e30, -1e30, NAN, INF, -INF, 7, -0.0]
unary("nan_to_num/default", lambda x: np.nan_to_num(x.astype(np.float32)).astype(np.float64), NTN_IN, tol=EXACT,
      op="nan_to_num", kwargs={"nan": 0.0, "posinf": None, "neginf": None},
      source="np.nan_to_num on float32 (posinf/neginf: float32 max/lowest)")
unary("nan_to_num/custom", lambda x: np.nan_to_num(x, nan=-1.0, posinf=1e3, neginf=-1e3), NTN_IN, tol=EXACT,
      op="nan_to_num", kwargs={"nan": -1.0, "posinf": 1e3, "neginf": -1e3}, source="np.nan_to_num(nan=-1, posinf=1e3, neginf=-1e3)")
unary("nan_to_num/nan_only", lambda x: np.nan_to_num(x.astype(np.float32), nan=5.0).astype(np.float64), NTN_IN, tol=EXACT,
      op="nan_to_num", kwargs={"nan": 5.0, "posinf": None, "neginf": None}, source="np.nan_to_num(nan=5) on float32")

# ------------------------------------------------------------------ elementwise, two arrays
FA = [5.5, -5.5, 5.5, -5.5, 0, 3, -3, 1, -1, INF, 2, NAN, 7, -0.5, 4.25, -7.75]
FB = [2, 2, -2, -2, 1, 0, 3, INF, INF, 2, NAN, 1, 2.5, 0.3, -1.5, 0.5]
binary("fmod", np.fmod, FA, FB, tol=SIMPLE, source="np.fmod (sign of the dividend)")
# np.mod: sign of the divisor (np.mod(-1, inf) = inf, np.mod(1, inf) = 1).
binary("mod", np.mod, FA, FB, tol=SIMPLE, source="np.mod (sign of the divisor)")
LA = [0, 1, -1, 100, -100, 1000, -INF, -INF, INF, INF, NAN, 3, -20]
LB = [0, 2, -3, 100, 3, 999, -INF, 5, INF, -INF, 1, NAN, 20]
binary("logaddexp", np.logaddexp, LA, LB)
binary("logaddexp2", np.logaddexp2, LA, LB)
binary("hypot", np.hypot, [3, -3, 0, 0, 1e30, -1e30, 1e-30, INF, -INF, INF, NAN, 5, 1],
       [4, 4, 0, -2, 1e30, 2e30, 1e-30, 3, NAN, NAN, 3, -12, 1e-4], tol=SIMPLE,
       source="np.hypot (inf wins over NaN, as C99 and jnp.hypot)")
binary("copysign", np.copysign, [1, -2, 0, 3, INF, NAN, 2, -0.0, 5, -5, 1.5, -INF, 0],
       [-1, 3, -1, -0.0, -1, -1, NAN, 1, 0, 0, -INF, 2, 0], tol=EXACT,
       source="np.copysign (the NaN in x2 is positive)")
# heaviside: 0 below zero, x2 at zero (also -0.0), 1 above. No NaN in x1: np.heaviside(nan, h) is nan,
# jnp.heaviside(nan, h) is h (its two comparisons are false), so the references would disagree.
binary("heaviside", np.heaviside, [-2, -1e-30, 0, 0, 0, -0.0, 1e-30, 3, INF, -INF, 0, 2, -5],
       [0.5, 0.5, 0.5, 0, 1, 0.25, 0.5, 0.5, 0.5, 0.5, NAN, NAN, NAN], tol=EXACT)

# ------------------------------------------------------------------ reductions
VI = f32([1.5, NAN, -2.0, INF, 0.0, 3.25, NAN, -0.5, 0.0, 7.0, 2.5, -1.25, 4.0])


def red(name, op, fn, x, axis, keepdims=False, tol=SIMPLE, dtype="float32", extra=None):
    kw = {"axis": axis, "keepdims": keepdims}
    if extra:
        kw.update(extra)
    npaxis = tuple(axis) if isinstance(axis, list) else axis
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # all-NaN slices
        y = fn(x, npaxis, keepdims)
    case(name, op, [x], np.asarray(y), kw, tol, dtype, f"np.{op}")


for op, fn in [("nansum", lambda x, a, k: np.nansum(x, axis=a, keepdims=k)),
               ("nanmean", lambda x, a, k: np.nanmean(x, axis=a, keepdims=k)),
               ("nanmax", lambda x, a, k: np.nanmax(x, axis=a, keepdims=k)),
               ("nanmin", lambda x, a, k: np.nanmin(x, axis=a, keepdims=k)),
               ("nanprod", lambda x, a, k: np.nanprod(x, axis=a, keepdims=k))]:
    tol = EXACT if op in ("nanmax", "nanmin") else SIMPLE
    # all-NaN row 3: nansum 0, nanprod 1, nanmean/nanmax/nanmin NaN (as jnp).
    red(f"{op}/all", op, fn, XN, None, tol=tol)
    red(f"{op}/axis0", op, fn, XN, 0, tol=tol)
    red(f"{op}/axis1_keepdims", op, fn, XN, 1, True, tol=tol)
    red(f"{op}/axes01", op, fn, XN, [0, 1], tol=tol)
for op, fn in [("nansum", lambda x, a, k: np.nansum(x, axis=a, keepdims=k)),
               ("nanmean", lambda x, a, k: np.nanmean(x, axis=a, keepdims=k)),
               ("nanmax", lambda x, a, k: np.nanmax(x, axis=a, keepdims=k)),
               ("nanmin", lambda x, a, k: np.nanmin(x, axis=a, keepdims=k))]:
    red(f"{op}/with_inf", op, fn, VI, None, tol=EXACT if op in ("nanmax", "nanmin") else SIMPLE)
# ptp does not skip NaNs (max - min): rows with a NaN give NaN.
ptp = lambda x, a, k: np.ptp(x, axis=a, keepdims=k)
red("ptp/all", "ptp", ptp, X, None)
red("ptp/axis0", "ptp", ptp, X, 0)
red("ptp/axis1_keepdims", "ptp", ptp, X, 1, True)
red("ptp/nan_axis1", "ptp", ptp, XN, 1)
for op in ("nanvar", "nanstd"):
    f = getattr(np, op)
    red(f"{op}/all", op, lambda x, a, k, f=f: f(x, axis=a, keepdims=k), XN, None, extra={"ddof": 0})
    red(f"{op}/axis0_ddof1", op, lambda x, a, k, f=f: f(x, axis=a, ddof=1, keepdims=k), XN, 0, extra={"ddof": 1})
    # Row 3 is all NaN: 0/0 = NaN here (ddof 0). With ddof 1 jnp would give -0.0 (0 / -1) where numpy gives NaN,
    # so ddof 1 is only checked along axis 0, where every column keeps at least 2 numbers.
    red(f"{op}/axis1_keepdims", op, lambda x, a, k, f=f: f(x, axis=a, keepdims=k), XN, 1, True, extra={"ddof": 0})
    red(f"{op}/axis-1_ddof1_nonan", op, lambda x, a, k, f=f: f(x, axis=a, ddof=1, keepdims=k), X, -1, extra={"ddof": 1})
cnz = lambda x, a, k: np.count_nonzero(x, axis=a, keepdims=k)
red("count_nonzero/all", "count_nonzero", cnz, XN, None, tol=EXACT, dtype="int32")
red("count_nonzero/axis0", "count_nonzero", cnz, XN, 0, tol=EXACT, dtype="int32")
red("count_nonzero/axis1_keepdims", "count_nonzero", cnz, X, 1, True, tol=EXACT, dtype="int32")
red("count_nonzero/vector", "count_nonzero", cnz, VI, None, tol=EXACT, dtype="int32")

# ------------------------------------------------------------------ scans
XP = f32(0.5 + np.abs(X) / 4)  # in [0.5, 1.5]: products stay in range
VNAN = f32([3.0, -1.5, 4.0, 2.25, -4.0, 5.5, NAN, -0.25, 8.0, 7.0, -2.5, 0.5, 6.0])
VLSE = f32([-INF, -INF, 0.0, 1.0, -INF, 50.0, 2.0, -3.0, 49.5, 100.0, -100.0, 0.5, 100.0])


def scan(name, op, fn, x, kwargs, tol):
    case(name, op, [x], fn(x), kwargs, tol, "float32", "")


scan("cumsum/flat", "cumsum", lambda x: np.cumsum(x), X, {"axis": None}, SIMPLE)
scan("cumsum/axis0", "cumsum", lambda x: np.cumsum(x, 0), X, {"axis": 0}, SIMPLE)
scan("cumsum/axis1", "cumsum", lambda x: np.cumsum(x, 1), X, {"axis": 1}, SIMPLE)
scan("cumsum/nan_inf", "cumsum", lambda x: np.cumsum(x), f32([1, 2, INF, 3, NAN, 4, 5, -1, 2, 0, 1, 2, 3]),
     {"axis": None}, SIMPLE)
scan("cumprod/flat", "cumprod", lambda x: np.cumprod(x), XP, {"axis": None}, SIMPLE)
scan("cumprod/axis0", "cumprod", lambda x: np.cumprod(x, 0), X, {"axis": 0}, SIMPLE)
scan("cumprod/axis1", "cumprod", lambda x: np.cumprod(x, 1), X, {"axis": 1}, SIMPLE)
scan("cummax/axis0", "cummax", lambda x: np.maximum.accumulate(x, 0), X, {"axis": 0}, EXACT)
scan("cummax/axis1", "cummax", lambda x: np.maximum.accumulate(x, 1), X, {"axis": 1}, EXACT)
scan("cummax/nan", "cummax", lambda x: np.maximum.accumulate(x, 0), VNAN, {"axis": 0}, EXACT)
scan("cummin/axis0", "cummin", lambda x: np.minimum.accumulate(x, 0), X, {"axis": 0}, EXACT)
scan("cummin/axis1", "cummin", lambda x: np.minimum.accumulate(x, 1), X, {"axis": 1}, EXACT)
scan("cummin/nan", "cummin", lambda x: np.minimum.accumulate(x, 0), VNAN, {"axis": 0}, EXACT)
scan("cumlogsumexp/axis0", "cumlogsumexp", lambda x: np.logaddexp.accumulate(x, 0), X, {"axis": 0}, TRANS)
scan("cumlogsumexp/axis1", "cumlogsumexp", lambda x: np.logaddexp.accumulate(x, 1), X, {"axis": 1}, TRANS)
with np.errstate(all="ignore"):
    scan("cumlogsumexp/neg_inf", "cumlogsumexp", lambda x: np.logaddexp.accumulate(x, 0), VLSE, {"axis": 0}, TRANS)

# ------------------------------------------------------------------ shapes
def shp(name, op, inputs, y, kwargs=None, tol=EXACT, source=""):
    case(name, op, [f32(x) for x in inputs], np.asarray(y, np.float64), kwargs, tol, "float32", source)


shp("roll/flat", "roll", [X], np.roll(X, 2), {"shift": 2, "axis": None})
shp("roll/axis0_neg", "roll", [X], np.roll(X, -3, 0), {"shift": -3, "axis": 0})
shp("roll/axis1_big", "roll", [X], np.roll(X, 7, 1), {"shift": 7, "axis": 1})
shp("roll/vector", "roll", [V13], np.roll(V13, 5), {"shift": 5, "axis": None})
shp("diff/default", "diff", [X], np.diff(X), {"n": 1, "axis": -1}, SIMPLE)
shp("diff/n2_axis0", "diff", [X], np.diff(X, 2, 0), {"n": 2, "axis": 0}, SIMPLE)
shp("diff/vector_n3", "diff", [V13], np.diff(V13, 3), {"n": 3, "axis": -1}, SIMPLE)
shp("repeat/flat", "repeat", [X], np.repeat(X, 2), {"repeats": 2, "axis": None})
shp("repeat/axis0", "repeat", [X], np.repeat(X, 3, 0), {"repeats": 3, "axis": 0})
shp("repeat/axis1", "repeat", [X], np.repeat(X, 2, 1), {"repeats": 2, "axis": 1})
shp("tile/2x1", "tile", [X], np.tile(X, (2, 1)), {"reps": [2, 1]})
shp("tile/vector3", "tile", [V13], np.tile(V13, 3), {"reps": [3]})
shp("tile/rank_up", "tile", [X], np.tile(X, (2, 1, 2)), {"reps": [2, 1, 2]})
MA, MB = f32([-3, -2, -1, 0, 1, 2, 3]), f32([0.5, 1.5, 2.5, 3.5, 4.5])
for ind in ("xy", "ij"):
    outs = np.meshgrid(MA, MB, indexing=ind)
    for k, o in enumerate(outs):
        shp(f"meshgrid/{ind}_{k}", "meshgrid", [MA, MB], o, {"indexing": ind, "output": k})
D5 = f32([1, -2, 3, -4, 5])
shp("diag/vector", "diag", [D5], np.diag(D5), {"k": 0})
shp("diag/vector_k1", "diag", [D5], np.diag(D5, 1), {"k": 1})
shp("diag/vector_k-2", "diag", [D5], np.diag(D5, -2), {"k": -2})
shp("diag/matrix", "diag", [X], np.diag(X), {"k": 0})
shp("diag/matrix_k2", "diag", [X], np.diag(X, 2), {"k": 2})
shp("diag/matrix_k-3", "diag", [X], np.diag(X, -3), {"k": -3})
shp("diagonal/default", "diagonal", [X], np.diagonal(X), {"offset": 0, "axis1": 0, "axis2": 1})
shp("diagonal/offset1", "diagonal", [X], np.diagonal(X, 1), {"offset": 1, "axis1": 0, "axis2": 1})
shp("diagonal/3d_12", "diagonal", [X3], np.diagonal(X3, 1, 1, 2), {"offset": 1, "axis1": 1, "axis2": 2})
shp("diagonal/3d_20", "diagonal", [X3], np.diagonal(X3, -1, 2, 0), {"offset": -1, "axis1": 2, "axis2": 0})
shp("trace/default", "trace", [X], np.trace(X), {"offset": 0, "axis1": 0, "axis2": 1}, SIMPLE)
shp("trace/offset1", "trace", [X], np.trace(X, 1), {"offset": 1, "axis1": 0, "axis2": 1}, SIMPLE)
shp("trace/offset-2", "trace", [X], np.trace(X, -2), {"offset": -2, "axis1": 0, "axis2": 1}, SIMPLE)
shp("trace/3d_12", "trace", [X3], np.trace(X3, 0, 1, 2), {"offset": 0, "axis1": 1, "axis2": 2}, SIMPLE)
X25 = f32([[9, 8, 7, 6, 5], [-1, -2, -3, -4, -5]])
X72 = f32(np.arange(14).reshape(7, 2) - 6.5)
V3 = f32([10, 20, 30])
V7 = f32([1, 2, 3, 4, 5, 6, 7])
shp("hstack/matrices", "hstack", [X, X72], np.hstack([X, X72]))
shp("hstack/vectors", "hstack", [V13, V3], np.hstack([V13, V3]))
shp("vstack/matrices", "vstack", [X, X25], np.vstack([X, X25]))
shp("vstack/vectors", "vstack", [D5, D5 * 2], np.vstack([D5, D5 * 2]))
shp("column_stack/vectors", "column_stack", [V7, V7 * -1], np.column_stack([V7, V7 * -1]))
shp("column_stack/mixed", "column_stack", [X, V7], np.column_stack([X, V7]))
shp("dstack/matrices", "dstack", [X, X * 2], np.dstack([X, X * 2]))
shp("dstack/vectors", "dstack", [D5, D5 * 3], np.dstack([D5, D5 * 3]))
shp("moveaxis/0_to_-1", "moveaxis", [X3], np.moveaxis(X3, 0, -1), {"source": 0, "destination": -1})
shp("moveaxis/2_to_0", "moveaxis", [X3], np.moveaxis(X3, 2, 0), {"source": 2, "destination": 0})
CA = f32([[1, 0, 0], [0, 1, 0], [1, 2, 3], [-1.5, 2, 0.5], [4, -5, 6], [0, 0, 0], [2.5, 2.5, -1]])
CB = f32([[0, 1, 0], [0, 0, 1], [4, 5, 6], [3, -0.5, 2], [-7, 8, 9], [1, 2, 3], [0.5, -2, 4]])
shp("cross/rows", "cross", [CA, CB], np.cross(CA, CB), tol=SIMPLE)
shp("cross/vectors", "cross", [CA[2], CB[2]], np.cross(CA[2], CB[2]), tol=SIMPLE)
shp("cross/broadcast", "cross", [CA, CB[3]], np.cross(CA, CB[3]), tol=SIMPLE)
KA = f32([[1, -2, 0.5], [0, 3, -1]])
shp("kron/matrices", "kron", [KA, X], np.kron(KA, X), tol=SIMPLE)
shp("kron/vectors", "kron", [V3, D5], np.kron(V3, D5), tol=SIMPLE)
shp("kron/tall", "kron", [X, KA], np.kron(X, KA), tol=SIMPLE)
for k in (1, 2, 3, -1, 4):
    shp(f"rot90/k{k}", "rot90", [X], np.rot90(X, k), {"k": k})
shp("rot90/3d", "rot90", [X3], np.rot90(X3, 1), {"k": 1})
shp("fliplr/matrix", "fliplr", [X], np.fliplr(X))
shp("fliplr/3d", "fliplr", [X3], np.fliplr(X3))
shp("flipud/matrix", "flipud", [X], np.flipud(X))
shp("flipud/vector", "flipud", [V13], np.flipud(V13))
shp("append/flat", "append", [X, V3], np.append(X, V3), {"axis": None})
shp("append/axis0", "append", [X, X25], np.append(X, X25, 0), {"axis": 0})
shp("append/axis1", "append", [X, X72], np.append(X, X72, 1), {"axis": 1})

# ------------------------------------------------------------------ jax.nn (closed forms as jax.nn defines them)
SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946


def expit(x):
    return sp.expit(x)


def softplus(x):
    return np.logaddexp(x, 0.0)


def elu(x, alpha=1.0):
    return np.where(x > 0, x, alpha * np.expm1(np.where(x > 0, 0.0, x)))


def relu6(x):
    return np.minimum(np.maximum(x, 0.0), 6.0)


def hard_sigmoid(x):
    return relu6(x + 3.0) / 6.0


NN = {
    "silu": lambda x, **k: x * expit(x),
    "swish": lambda x, **k: x * expit(x),
    "elu": lambda x, alpha=1.0: elu(x, alpha),
    "celu": lambda x, alpha=1.0: np.maximum(x, 0.0) + alpha * np.expm1(np.minimum(x, 0.0) / alpha),
    "selu": lambda x, **k: SELU_SCALE * elu(x, SELU_ALPHA),
    "leaky_relu": lambda x, negative_slope=0.01: np.where(x >= 0, x, negative_slope * x),
    "softplus": lambda x, **k: softplus(x),
    "log_sigmoid": lambda x, **k: -softplus(-x),
    "relu6": lambda x, **k: relu6(x),
    "hard_tanh": lambda x, **k: np.where(x > 1, 1.0, np.where(x < -1, -1.0, x)),
    "hard_sigmoid": lambda x, **k: hard_sigmoid(x),
    "hard_silu": lambda x, **k: x * hard_sigmoid(x),
    "hard_swish": lambda x, **k: x * hard_sigmoid(x),
    "soft_sign": lambda x, **k: x / (np.abs(x) + 1.0),
    "mish": lambda x, **k: x * np.tanh(softplus(x)),
    "squareplus": lambda x, b=4.0: (x + np.sqrt(x * x + b)) / 2.0,
    "sparse_plus": lambda x, **k: np.where(x <= -1, 0.0, np.where(x >= 1, x, (x + 1) ** 2 / 4)),
}
NN_IN = [-100, -20, -5, -3, -1, -0.5, -1e-3, 0, 1e-3, 0.5, 1, 3, 5, 6, 20, 100, NAN]
# Infinities only where the closed form is defined at them (x * sigmoid(x) at -inf is -inf * 0 = NaN etc.).
NN_INF = {"relu6", "hard_tanh", "hard_sigmoid", "softplus", "log_sigmoid", "elu", "leaky_relu", "sparse_plus", "celu"}
NN_KW = {"elu": [{"alpha": 1.0}, {"alpha": 0.5}], "celu": [{"alpha": 1.0}, {"alpha": 2.0}],
         "leaky_relu": [{"negative_slope": 0.01}, {"negative_slope": 0.2}], "squareplus": [{"b": 4.0}, {"b": 1.0}]}
for op, fn in NN.items():
    xin = NN_IN + ([INF, -INF] if op in NN_INF else [])
    exact = op in ("relu6", "hard_tanh", "leaky_relu")
    for kw in NN_KW.get(op, [{}]):
        suffix = "".join(f"_{k}{v}" for k, v in kw.items())
        x = f32(xin)
        with np.errstate(all="ignore"):
            y = fn(x, **kw)
        case(f"nn.{op}{suffix}", f"nn.{op}", [x], y, kw, SIMPLE if exact else TRANS, "float32",
             f"jax.nn.{op} closed form")
# glu: a * sigmoid(b), (a, b) the two halves along axis.
G76 = f32(np.arange(42).reshape(7, 6) * 0.25 - 5.0)
G103 = f32(np.arange(30).reshape(10, 3) * -0.3 + 4.0)
for name, x, ax in [("nn.glu/axis-1", G76, -1), ("nn.glu/axis0", G103, 0)]:
    a, b = np.split(x, 2, axis=ax)
    case(name, "nn.glu", [x], a * expit(b), {"axis": ax}, TRANS, "float32", "jax.nn.glu closed form")


def standardize(x, axis, eps):
    m = np.mean(x, axis=axis, keepdims=True)
    v = np.mean((x - m) ** 2, axis=axis, keepdims=True)
    return (x - m) / np.sqrt(v + eps)


for name, ax, eps in [("nn.standardize/axis-1", -1, 1e-5), ("nn.standardize/axis0", 0, 1e-5),
                      ("nn.standardize/axes01_eps1e-2", [0, 1], 1e-2)]:
    case(name, "nn.standardize", [X], standardize(X, tuple(ax) if isinstance(ax, list) else ax, eps),
         {"axis": ax, "epsilon": eps}, TRANS, "float32", "(x - mean) / sqrt(var + eps), var = mean((x - mean)^2)")
LSE = X.copy()
LSE[2, :] = -INF           # a row of -inf: -inf
LSE[4, 1] = INF            # a row with +inf: inf
LSE[6, :] = f32([1000, 999, -1000, 998.5, 1000])  # large values: no overflow
with np.errstate(all="ignore"):
    for name, ax, kd in [("nn.logsumexp/all_finite", None, False), ("nn.logsumexp/axis1", 1, False),
                         ("nn.logsumexp/axis1_keepdims", 1, True), ("nn.logsumexp/axis0", 0, False)]:
        x = X if name.endswith("all_finite") else LSE
        case(name, "nn.logsumexp", [x], np.asarray(sp.logsumexp(x, axis=ax, keepdims=kd)),
             {"axis": ax, "keepdims": kd}, TRANS, "float32", "scipy.special.logsumexp")

# ------------------------------------------------------------------ scipy.special
unary("special.erf", sp.erf, [-INF, -5, -2, -1, -0.5, -1e-4, 0, 1e-4, 0.5, 1, 2, 5, INF, NAN])
unary("special.erfc", sp.erfc, [-INF, -3, -1, -1e-4, 0, 0.5, 1, 3, 5, 9, 10, INF, NAN])
unary("special.erfinv", sp.erfinv, [-1, -0.9999, -0.999, -0.9, -0.5, 0, 1e-4, 0.5, 0.9, 0.999, 0.9999, 1, 1.5, -2, NAN])
# gammaln at 0 and the negative integers is +inf (scipy and XLA's lgamma agree); log|Gamma| between them.
unary("special.gammaln", sp.gammaln, [0, -1, -2, -0.5, -2.5, 1e-6, 0.5, 1, 2, 2.5, 10, 100, 1e5, INF, NAN])
# digamma at 0 and the negative integers: scipy gives -inf at 0 and NaN below, XLA's digamma NaN for all;
# only the negative integers (NaN in both) are checked.
unary("special.digamma", sp.digamma, [-1, -2, -2.5, -0.5, 1e-3, 0.5, 1, 1.4616321, 2, 10, 100, 1e4, INF, NAN])
unary("special.logit", sp.logit, [0, 1e-6, 0.1, 0.25, 0.5, 0.75, 0.9, 0.999, 1, -0.5, 1.5, NAN])
unary("special.expit", sp.expit, [-INF, -100, -10, -1, -1e-3, 0, 1e-3, 1, 10, 100, INF, NAN])
# xlogy(0, y) = 0 for every y but NaN (jnp gives 0 at y = NaN too; scipy NaN: left out).
binary("special.xlogy", sp.xlogy, [0, 0, 0, 0, 1, 2, -1, 1, NAN, 3, 0.5, -2, 1e-3],
       [0, 1, -1, INF, 0, 3, 2, -1, 1, INF, 1e-30, 0.5, 1e3])
binary("special.xlog1py", sp.xlog1py, [0, 0, 1, 2, -1, 1, NAN, 3, 0.5, -2, 1, 0, 4],
       [-1, 0, -1, 1e-7, 3, -2, 1, INF, -0.5, 0.5, -1e-6, 1e3, 9])
unary("special.i0e", sp.i0e, [-INF, -500, -50, -10, -1, -1e-3, 0, 1e-3, 0.5, 1, 5, 10, 50, 500, INF, NAN])
unary("special.i1e", sp.i1e, [-INF, -500, -50, -10, -1, -1e-3, 0, 1e-3, 0.5, 1, 5, 10, 50, 500, INF, NAN])
binary("special.betaln", sp.betaln, [0.5, 1, 2, 10, 1e-3, 50, 3.5, 0.25, 60, 7, 1.5, 20, 5],
       [0.5, 1, 3, 20, 1, 50, 8, 4, 40, 0.1, 1.5, 2, 0.75])
unary("special.log_ndtr", sp.log_ndtr, [-INF, -40, -20, -10, -5, -1, 0, 1, 3, 5, 10, INF, NAN])
unary("special.ndtr", sp.ndtr, [-INF, -40, -10, -5, -1, -1e-3, 0, 0.5, 1, 5, 10, INF, NAN])
# ndtri(0) = -inf, ndtri(1) = inf. Outside [0, 1] scipy gives NaN but jax.scipy.special.ndtri -inf below 0
# and inf above 1 (its last step is where(p <= 0, -inf, where(p >= 1, inf, x))): left out.
unary("special.ndtri", sp.ndtri, [0, 1e-10, 1e-3, 0.025, 0.1, 0.25, 0.5, 0.75, 0.9, 0.975, 0.999, 0.9999999, 1, NAN])

# ------------------------------------------------------------------ gradients (float64)
H = 1e-6
grad_cases = []


def fd_grad(fn, xs, kw):
    """Central differences of sum(fn(*xs)) per input element."""
    out = []
    for i, x in enumerate(xs):
        g = np.zeros_like(x)
        flat = g.reshape(-1)
        for j in range(x.size):
            def at(d):
                ys = [y.copy() for y in xs]
                ys[i].reshape(-1)[j] += d
                return float(np.sum(fn(*ys, **kw)))
            flat[j] = (at(H) - at(-H)) / (2 * H)
        out.append(g)
    return out


def grad_case(name, op, fn, xs, kw=None, analytic=None):
    kw = kw or {}
    xs = [np.asarray(x, np.float64) for x in xs]
    g = fd_grad(fn, xs, kw)
    if analytic is not None:  # self-check of the differences against a known derivative
        for gi, ai in zip(g, analytic(*xs)):
            assert np.allclose(gi, ai, rtol=1e-7, atol=1e-7), (name, gi, ai)
    assert names.isdisjoint({name}) and all(c["name"] != name for c in grad_cases), name
    grad_cases.append({
        "name": name,
        "op": op,
        "group": group_of(op),
        "inputs": [enc_array(x, "float64") for x in xs],
        "kwargs": kw,
        "h": H,
        "expected_value": enc_array(fn(*xs, **kw), "float64"),
        "expected_grad": [enc_array(gi, "float64") for gi in g],
        "tol": 1e-5,
    })


G13 = np.array([-2.9, -2.3, -1.7, -1.1, -0.7, -0.35, 0.15, 0.45, 0.8, 1.3, 1.9, 2.4, 2.85])
POS13 = np.array([0.11, 0.3, 0.55, 0.8, 1.2, 1.7, 2.3, 3.1, 4.4, 5.9, 7.3, 8.8, 9.7])
# Away from the kinks of relu6 (0, 6), hard_tanh (+-1), hard_sigmoid/silu (+-3), elu/leaky (0), sparse_plus (+-1).
KINKLESS = np.array([-7.3, -4.1, -2.6, -1.7, -0.83, -0.41, 0.37, 0.79, 1.55, 2.2, 3.6, 5.3, 6.8])
A75 = np.sin(np.arange(35.0).reshape(7, 5) * 0.9) * 2.5
B75 = np.cos(np.arange(35.0).reshape(7, 5) * 1.3) * 2.0 + 0.1

grad_case("grad sinh", "sinh", np.sinh, [G13], analytic=lambda x: [np.cosh(x)])
grad_case("grad cosh", "cosh", np.cosh, [G13], analytic=lambda x: [np.sinh(x)])
grad_case("grad log2", "log2", np.log2, [POS13], analytic=lambda x: [1 / (x * np.log(2))])
grad_case("grad log10", "log10", np.log10, [POS13], analytic=lambda x: [1 / (x * np.log(10))])
grad_case("grad exp2", "exp2", np.exp2, [G13 * 2], analytic=lambda x: [np.exp2(x) * np.log(2)])
grad_case("grad logaddexp", "logaddexp", np.logaddexp, [A75, B75],
          analytic=lambda a, b: [sp.expit(a - b), sp.expit(b - a)])
grad_case("grad arcsinh", "arcsinh", np.arcsinh, [G13 * 2], analytic=lambda x: [1 / np.sqrt(x * x + 1)])
grad_case("grad arctan", "arctan", np.arctan, [G13 * 2], analytic=lambda x: [1 / (x * x + 1)])
for op, fn in NN.items():
    for kw in NN_KW.get(op, [{}]):
        suffix = "".join(f"_{k}{v}" for k, v in kw.items())
        grad_case(f"grad nn.{op}{suffix}", f"nn.{op}", fn, [KINKLESS], kw)
grad_case("grad nn.glu/axis-1", "nn.glu",
          lambda x, axis: np.split(x, 2, axis=axis)[0] * expit(np.split(x, 2, axis=axis)[1]),
          [np.sin(np.arange(42.0).reshape(7, 6)) * 3], {"axis": -1})
grad_case("grad nn.standardize/axis-1", "nn.standardize",
          lambda x, axis, epsilon: standardize(x, axis, epsilon), [A75], {"axis": -1, "epsilon": 1e-5})
grad_case("grad nn.standardize/axis0", "nn.standardize",
          lambda x, axis, epsilon: standardize(x, axis, epsilon), [A75], {"axis": 0, "epsilon": 1e-5})
grad_case("grad nn.logsumexp/all", "nn.logsumexp",
          lambda x, axis, keepdims: sp.logsumexp(x, axis=axis, keepdims=keepdims), [A75], {"axis": None, "keepdims": False})
grad_case("grad nn.logsumexp/axis1", "nn.logsumexp",
          lambda x, axis, keepdims: sp.logsumexp(x, axis=axis, keepdims=keepdims), [A75], {"axis": 1, "keepdims": False})
grad_case("grad special.erf", "special.erf", sp.erf, [G13],
          analytic=lambda x: [2 / np.sqrt(np.pi) * np.exp(-x * x)])
grad_case("grad special.erfc", "special.erfc", sp.erfc, [G13],
          analytic=lambda x: [-2 / np.sqrt(np.pi) * np.exp(-x * x)])
grad_case("grad special.erfinv", "special.erfinv", sp.erfinv, [G13 / 3.1],
          analytic=lambda x: [np.sqrt(np.pi) / 2 * np.exp(sp.erfinv(x) ** 2)])
GAM = np.array([-2.5, -1.3, -0.5, 0.05, 0.3, 0.7, 1.0, 1.6, 2.5, 4.2, 7.7, 12.5, 19.0])
grad_case("grad special.gammaln", "special.gammaln", sp.gammaln, [GAM], analytic=lambda x: [sp.digamma(x)])
grad_case("grad special.digamma", "special.digamma", sp.digamma, [GAM[1:]],
          analytic=lambda x: [sp.polygamma(1, x)])
grad_case("grad special.logit", "special.logit", sp.logit, [np.linspace(0.05, 0.95, 13)],
          analytic=lambda x: [1 / (x * (1 - x))])
grad_case("grad special.expit", "special.expit", sp.expit, [G13 * 3],
          analytic=lambda x: [sp.expit(x) * (1 - sp.expit(x))])
grad_case("grad special.xlogy", "special.xlogy", sp.xlogy, [A75, np.abs(B75) + 0.2],
          analytic=lambda x, y: [np.log(y), x / y])
BES = np.array([-6.5, -4.2, -2.3, -1.1, -0.6, -0.25, 0.2, 0.55, 1.05, 2.1, 3.7, 5.2, 8.9])
grad_case("grad special.i0e", "special.i0e", sp.i0e, [BES],
          analytic=lambda x: [sp.i1e(x) - np.sign(x) * sp.i0e(x)])
grad_case("grad special.i1e", "special.i1e", sp.i1e, [BES],
          analytic=lambda x: [sp.i0e(x) - sp.i1e(x) * (np.sign(x) + 1 / x)])
LNDTR = np.array([-15.0, -9.5, -6.2, -3.3, -1.9, -0.8, -0.1, 0.4, 1.1, 2.2, 3.4, 4.6, 5.8])
grad_case("grad special.log_ndtr", "special.log_ndtr", sp.log_ndtr, [LNDTR],
          analytic=lambda x: [np.exp(-x * x / 2 - sp.log_ndtr(x)) / np.sqrt(2 * np.pi)])
grad_case("grad special.ndtr", "special.ndtr", sp.ndtr, [G13 * 1.5],
          analytic=lambda x: [np.exp(-x * x / 2) / np.sqrt(2 * np.pi)])
grad_case("grad special.ndtri", "special.ndtri", sp.ndtri,
          [np.array([0.01, 0.04, 0.1, 0.2, 0.3, 0.45, 0.5, 0.55, 0.7, 0.8, 0.9, 0.96, 0.99])],
          analytic=lambda p: [np.sqrt(2 * np.pi) * np.exp(sp.ndtri(p) ** 2 / 2)])

out = {
    "comment": ("Written by tools/numpy_reference.py (NumPy " + np.__version__ + ", SciPy " + __import__("scipy").__version__ +
                "); do not edit. Non-finite numbers are the strings \"nan\", \"inf\", \"-inf\"."),
    "cases": cases,
    "grad_cases": grad_cases,
}
path = sys.argv[1] if len(sys.argv) > 1 else "tests/data/numpy/surface.json"
with open(path, "w") as f:
    json.dump(out, f, indent=None, allow_nan=False, separators=(",", ":"))
    f.write("\n")
print(f"{path}: {len(cases)} cases, {len(grad_cases)} gradient cases")

# ====================================================================== surface2.json
# Sorting and searching (sort, argsort, lax.top_k, lax.sort, searchsorted),
# counting (bincount, histogram, isin), quantiles (quantile, percentile,
# median and their nan versions), index and set functions (unique, nonzero,
# argwhere, flatnonzero) and lax.associative_scan / lax.reduce with C++
# lambdas, read by tests/dsl/surface_ref2_test.cpp; a file of its own, so
# that each test's rule "every case's op has a lambda and every lambda a
# case" holds for its own table.
#
# The same encoding as surface.json's "cases" (no "grad_cases"), except that
# an input is float32 or int32 ("dtype"; the C++ test builds that dtype).
# Functions of several outputs have one case per output, chosen by the
# kwarg "output" (an index, or "values"/"indices" for top_k and
# "counts"/"edges" for histogram), as meshgrid in surface.json. Where JAX
# and NumPy differ the reference is JAX's, said at the case:
#   - sort/argsort descending is JAX's rev of the ascending sort: NaNs
#     first, and equal elements (and NaNs) keep their order (stable).
#   - lax.top_k breaks ties by the lower index (no NaN, no -0.0 in its
#     inputs: XLA's TopK orders them by its own total order).
#   - bincount with `length` (every case has one): exactly `length` bins,
#     values >= length dropped, minlength ignored (here minlength <= length).
#   - quantile's "nearest" takes the lower neighbour at a virtual index
#     k + 0.5 (JAX: high_weight <= 0.5), NumPy rounds half to even: no case
#     has such an index. No infinities in quantile inputs (JAX's linear
#     interpolation gives inf * 0 = NaN where NumPy's lerp differs).
#   - unique with size: padded with fill_value, by default the smallest
#     unique value (JAX's); truncated to the first `size` when smaller.
#     NaNs count as one value (equal_nan, NumPy's and JAX's default).
#   - nonzero/argwhere/flatnonzero with size: padded with fill_value
#     (default 0) or truncated.
#   - lax.reduce: init_values must be an identity of the computation
#     (jax.lax.reduce's contract: otherwise undefined, and a sharded
#     reduction may fold it once per device); the cases use 0 for add, 1
#     for multiply, -inf for max, and one max with init 0 (idempotent).
cases2 = []
names2 = set()
GROUPS2 = {
    "sort": {"sort", "argsort", "lax.top_k", "lax.sort", "searchsorted"},
    "count": {"bincount", "histogram", "isin"},
    "quantile": {"quantile", "percentile", "median", "nanquantile", "nanpercentile", "nanmedian"},
    "index": {"unique", "nonzero", "argwhere", "flatnonzero"},
    "lax": {"lax.associative_scan", "lax.reduce"},
}


def group2_of(op):
    """The TEST_CASE of surface_ref2_test.cpp that runs the case."""
    groups = [g for g, ops in GROUPS2.items() if op in ops]
    assert len(groups) == 1, op
    return groups[0]


def i32(values, shape=None):
    a = np.asarray(values, dtype=np.int32)
    return a.reshape(shape) if shape is not None else a


def enc_input(x):
    if np.asarray(x).dtype == np.int32:
        return enc_array(x, "int32")
    x = np.asarray(x, np.float64)
    assert np.array_equal(x, f32(x), equal_nan=True)  # float32 values already
    return enc_array(x, "float32")


def case2(name, op, inputs, expected, kwargs=None, tol=EXACT, dtype="float32", source=""):
    assert name not in names2, name
    names2.add(name)
    if dtype == "float32":
        expected = as_float32_result(expected)
    cases2.append({
        "name": name,
        "op": op,
        "group": group2_of(op),
        "source": source,
        "inputs": [enc_input(x) for x in inputs],
        "kwargs": kwargs or {},
        "expected": enc_array(expected, dtype),
        "tol": tol,
    })


def dtype_of(x):
    return "int32" if np.asarray(x).dtype == np.int32 else "float32"


# ------------------------------------------------------------------ sort, argsort
def order_1d(v, descending):
    """Stable order of v: NaNs last ascending; descending is JAX's rev(sort): the
    groups of equal values (NaNs one group, first) each keep their index order."""
    v = np.asarray(v, np.float64)
    idx = range(len(v))
    if descending:
        return np.array(sorted(idx, key=lambda i: (not math.isnan(v[i]), 0.0 if math.isnan(v[i]) else -v[i], i)))
    return np.array(sorted(idx, key=lambda i: (math.isnan(v[i]), 0.0 if math.isnan(v[i]) else v[i], i)))


def order(x, axis, descending):
    o = np.apply_along_axis(lambda v: order_1d(v, descending), axis, np.asarray(x, np.float64))
    if not descending:  # self-check against NumPy's stable argsort
        assert np.array_equal(o, np.argsort(x, axis=axis, kind="stable"))
    return o


# Ties (3, -1.5, 0 and -0.0, two NaNs) and both infinities.
SV13 = f32([3.0, -1.5, NAN, 2.25, -INF, 0.0, 3.0, -1.5, INF, NAN, -0.0, 7.0, 0.5])
# A [7, 5] of few distinct values: ties along both axes, NaNs and infinities.
T75 = f32([[2, -1, 2, NAN, 0],
           [0.5, 2, -1, 2, 0.5],
           [-1, NAN, 0.5, -1, 2],
           [2, 0.5, 0.5, INF, -1],
           [0.5, -1, NAN, 0.5, -INF],
           [-INF, 2, 2, -1, 0.5],
           [0, 0.5, -1, 2, NAN]])
SI13 = i32([4, -2, 7, 4, 0, -2, 9, 4, 1, 0, -5, 7, 4])
for name, x, axis in [("vector", SV13, -1), ("axis0", T75, 0), ("axis1", T75, 1), ("axis-1", T75, -1),
                      ("int32", SI13, 0)]:
    for desc in (False, True):
        suffix = "_desc" if desc else ""
        o = order(x, axis, desc)
        case2(f"sort/{name}{suffix}", "sort", [x], np.take_along_axis(x, o, axis), {"axis": axis, "descending": desc},
              EXACT, dtype_of(x), "np.sort (stable); descending: rev of the ascending sort, NaNs first")
        case2(f"argsort/{name}{suffix}", "argsort", [x], o, {"axis": axis, "descending": desc}, EXACT, "int32",
              "np.argsort(kind='stable'); descending: equal elements keep their order, NaNs first")

# ------------------------------------------------------------------ lax.top_k
TK13 = f32([3, -1.5, 7, 3, 0.5, 7, -4, 2.25, 3, INF, -INF, 0.5, 7])
TK75 = np.where(np.isnan(T75), 1.0, T75)
TKI = i32([[5, 1, 5, 2, 5], [0, 0, 0, 0, 0], [9, -3, 4, 9, 4], [1, 2, 3, 4, 5], [5, 4, 3, 2, 1],
           [-1, -1, 7, -1, 7], [2, 8, 2, 8, 2]])
for name, x, k in [("vector_k1", TK13, 1), ("vector_k5", TK13, 5), ("vector_k13", TK13, 13),
                   ("matrix_k3", TK75, 3), ("matrix_k5", TK75, 5), ("int32_k2", TKI, 2)]:
    o = order(x, -1, True)[..., :k]  # descending, ties by the lower index
    case2(f"lax.top_k/{name}_values", "lax.top_k", [x], np.take_along_axis(x, o, -1), {"k": k, "output": "values"},
          EXACT, dtype_of(x), "lax.top_k: the k largest along the last axis")
    case2(f"lax.top_k/{name}_indices", "lax.top_k", [x], o, {"k": k, "output": "indices"}, EXACT, "int32",
          "lax.top_k: their indices, ties by the lower index")


# ------------------------------------------------------------------ lax.sort (several operands)
def lexorder(keys, axis):
    """Stable order by keys[0], then keys[1], ...: np.lexsort with the keys reversed."""
    o = np.lexsort([np.asarray(k) for k in keys[::-1]], axis=axis)
    if len(keys) == 1:
        assert np.array_equal(o, order(keys[0], axis, False))
    return o


LK0 = f32([2, 1, 2, NAN, 1, 0, 2, 1, -0.0, 0, NAN, 1, -INF])
LK1 = i32([5, 3, 1, 0, 3, 9, 1, 7, 2, 1, 4, 2, 6])
LP13 = f32(np.arange(13) * 0.5 - 3)
LK1M = i32([[3, 1, 3, 2, 0], [1, 1, 0, 0, 2], [2, 2, 2, 1, 1], [0, 3, 1, 1, 0], [1, 0, 1, 2, 2],
            [3, 3, 0, 0, 1], [2, 1, 1, 0, 3]])
LPM = i32(np.arange(35).reshape(7, 5) * 10)
for name, ops_, dim, nk in [("vector_keys1", [LK0, LP13], 0, 1), ("vector_keys2", [LK0, LK1, LP13], 0, 2),
                            ("vector_keys2_int_first", [LK1, LK0, LP13], -1, 2),
                            ("matrix_dim-1_keys1", [T75, LPM], -1, 1), ("matrix_dim-1_keys2", [T75, LK1M, LPM], -1, 2),
                            ("matrix_dim0_keys2", [T75, LK1M, X], 0, 2), ("matrix_dim0_keys1", [LK1M, T75], 0, 1)]:
    o = lexorder(ops_[:nk], dim)
    for k, x in enumerate(ops_):
        case2(f"lax.sort/{name}_{k}", "lax.sort", ops_, np.take_along_axis(x, o, dim),
              {"dimension": dim, "num_keys": nk, "output": k}, EXACT, dtype_of(x),
              "np.lexsort of the keys reversed (stable), every operand permuted alike")

# ------------------------------------------------------------------ searchsorted
SA11 = f32([-INF, -2, -0.5, 0, 0, 0, 1.5, 3, 3, 8, INF])
SQ13 = f32([-3, -2, NAN, 0, -0.0, 1.5, 2, 3, 100, INF, -INF, 0.25, 8])
SQ75 = f32([[-2, -0.5, 0, 3, 8], [NAN, 1, 1.5, -1, 9], [-INF, INF, 0, 3, -0.5], [2.5, -2, -2.5, 8, 7],
            [0, 0, 3, 3, NAN], [1e30, -1e30, 1.5, 0.5, -0.25], [3, -0.0, 8, INF, -2]])
SAI = i32([1, 3, 3, 5, 8, 8, 8, 13])
SQI = i32([[0, 1, 3, 4, 8], [8, 9, 13, 14, -1], [5, 5, 2, 7, 3], [1, 13, 0, 6, 8], [3, 8, 12, 2, 1],
           [-5, 100, 5, 4, 9], [8, 3, 1, 13, 6]])
for name, a, v in [("vector", SA11, SQ13), ("matrix", SA11, SQ75), ("int32", SAI, SQI)]:
    for side in ("left", "right"):
        case2(f"searchsorted/{name}_{side}", "searchsorted", [a, v], np.searchsorted(a, v, side), {"side": side},
              EXACT, "int32", f"np.searchsorted(side='{side}'): NaNs after every number")

# ------------------------------------------------------------------ bincount (always with length)
BX13 = i32([0, 3, 1, 3, 7, 2, 0, 3, 9, 1, 1, 4, 3])
BW13 = f32([0.5, 1, -2, 0.25, 3, 1.5, -0.75, 2, 4, 0.125, 1, -1, 0.5])


def bincount_ref(x, w, minlength, length):
    c = np.bincount(x, w, minlength)[:length]
    return np.concatenate([c, np.zeros(length - len(c), c.dtype)])


for name, w, minlength, length in [("length_pad", None, 0, 14), ("length_exact", None, 0, 10),
                                   ("length_short", None, 0, 5), ("minlength", None, 12, 12),
                                   ("weights_pad", BW13, 0, 12), ("weights_short", BW13, 3, 4),
                                   ("weights_exact", BW13, 0, 10)]:
    case2(f"bincount/{name}", "bincount", [BX13] + ([w] if w is not None else []),
          bincount_ref(BX13, w, minlength, length), {"minlength": minlength, "length": length},
          EXACT if w is None else SIMPLE, "int32" if w is None else "float32",
          "np.bincount, cut or padded to length (JAX: values >= length dropped)")

# ------------------------------------------------------------------ histogram
H13 = f32([-4, -3.5, -1, 0, 0, 0.5, 1, 2.75, 4, 4.5, NAN, -INF, INF])  # edges, outside, NaN, infinities
HM = f32([-0.85, -0.55, -0.25, 0.05, 0.35, 0.65, 0.95, 1.25, 1.55, 1.85, 0.05, 0.95, -0.85])  # mid-bin
for name, x, bins, rng, etol in [("vector_8", H13, 8, (-4.0, 4.0), EXACT), ("matrix_16", X, 16, (-4.0, 4.0), EXACT),
                                 ("matrix_3", X, 3, (-2.0, 4.0), EXACT), ("vector_10_nondyadic", HM, 10, (-1.0, 2.0), SIMPLE)]:
    counts, edges = np.histogram(x, bins, rng)
    kw = {"bins": bins, "range": list(rng)}
    case2(f"histogram/{name}_counts", "histogram", [x], counts.astype(np.float64), {**kw, "output": "counts"}, EXACT,
          "float32", "np.histogram (bins [a, b), the last [a, b]; NaN and values outside dropped)")
    case2(f"histogram/{name}_edges", "histogram", [x], np.linspace(rng[0], rng[1], bins + 1),
          {**kw, "output": "edges"}, etol, "float32", "np.linspace(lo, hi, bins + 1)")

# ------------------------------------------------------------------ isin
IE13 = f32([3, -1.5, NAN, 0, -0.0, INF, 2, 7, 3, 1e-30, -INF, 0.5, 6])
IT7 = f32([0, 3, NAN, INF, 0.5, 100, -7])
IT23 = f32([[1.5, -2.25, 0], [4, -2, 0.25]])
IEI = i32(np.arange(35).reshape(7, 5) % 9 - 3)
ITI = i32([-3, 0, 4, 5, 99])
for name, e, t in [("vector", IE13, IT7), ("matrix_2d_test", X, IT23), ("int32", IEI, ITI)]:
    for inv in (False, True):
        case2(f"isin/{name}{'_invert' if inv else ''}", "isin", [e, t], np.isin(e, t, invert=inv), {"invert": inv},
              EXACT, "bool", "np.isin (NaN is in nothing, -0.0 is 0)")

# ------------------------------------------------------------------ quantiles
QV13 = V13
QVN = f32([3.0, NAN, 0.0, 2.25, -4.0, 5.5, NAN, -0.25, 0.0, 7.0, -2.5, NAN, 6.0])
METHODS = ("linear", "lower", "higher", "nearest", "midpoint")


def check_virtual_index(q, n, method):
    """The virtual index q (n - 1) must pick the same neighbours in float32 as in float64, and
    "nearest" must not meet k + 0.5 (JAX takes the lower, NumPy rounds half to even)."""
    g64 = q * (n - 1)
    g32 = float(np.float32(q) * np.float32(n - 1))
    assert math.floor(g64) == math.floor(g32) and math.ceil(g64) == math.ceil(g32), (q, n)
    if method == "nearest":
        assert abs(g64 - math.floor(g64) - 0.5) > 1e-3, (q, n)


def slice_counts(x, axis, skip_nan):
    """The element counts of the slices a quantile along axis reduces."""
    ok = ~np.isnan(x) if skip_nan else np.ones(x.shape, bool)
    return np.unique(ok.sum() if axis is None else ok.sum(axis=axis))


def quant(name, op, x, q, axis, method, keepdims=False):
    npfn = getattr(np, op)
    skip = op.startswith("nan")
    qq = q / 100 if op.endswith("percentile") else q
    for n in slice_counts(x, axis, skip):
        if n > 0:
            check_virtual_index(qq, int(n), method)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # all-NaN slices
        y = npfn(x, q, axis=axis, method=method, keepdims=keepdims)
    exact = method in ("lower", "higher", "nearest")
    case2(name, op, [x], np.asarray(y), {"q": q, "axis": axis, "method": method, "keepdims": keepdims},
          EXACT if exact else SIMPLE, "float32", f"np.{op}(method='{method}')")


for m in METHODS:
    quant(f"quantile/{m}/vector_q0.3", "quantile", QV13, 0.3, None, m)
    quant(f"quantile/{m}/all_q0.9", "quantile", X, 0.9, None, m)
    quant(f"quantile/{m}/axis0_q0.3", "quantile", X, 0.3, 0, m)
    quant(f"quantile/{m}/axis1_keepdims_q0.6", "quantile", X, 0.6, 1, m, True)
    quant(f"quantile/{m}/axis-1_q0.1", "quantile", X, 0.1, -1, m)
    quant(f"quantile/{m}/nan_axis1", "quantile", XN, 0.3, 1, m)  # a NaN in a row: NaN
    quant(f"nanquantile/{m}/vector_q0.3", "nanquantile", QVN, 0.3, None, m)
    quant(f"nanquantile/{m}/all_q0.9", "nanquantile", XN, 0.9, None, m)
    quant(f"nanquantile/{m}/axis0_q0.65", "nanquantile", XN, 0.65, 0, m)
    quant(f"nanquantile/{m}/axis1_keepdims_q0.6", "nanquantile", XN, 0.6, 1, m, True)  # row 3 all NaN: NaN
    quant(f"percentile/{m}/vector_q30", "percentile", QV13, 30.0, None, m)
    quant(f"percentile/{m}/axis0_q90", "percentile", X, 90.0, 0, m)
    quant(f"nanpercentile/{m}/axis1_q60", "nanpercentile", XN, 60.0, 1, m)
    quant(f"nanpercentile/{m}/vector_q85", "nanpercentile", QVN, 85.0, None, m)
for op in ("quantile", "nanquantile"):
    xin = X if op == "quantile" else XN
    quant(f"{op}/linear/q0_axis0", op, xin, 0.0, 0, "linear")
    quant(f"{op}/linear/q1_axis1", op, xin, 1.0, 1, "linear")
    quant(f"{op}/higher/q0.25_vector", op, QV13 if op == "quantile" else QVN, 0.25, None, "higher")
quant("percentile/linear/q0_all", "percentile", X, 0.0, None, "linear")
quant("percentile/linear/q100_axis1_keepdims", "percentile", X, 100.0, 1, "linear", True)
quant("nanpercentile/lower/q37.5_axis0", "nanpercentile", XN, 37.5, 0, "lower")


def med(name, op, x, axis, keepdims=False):
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        y = getattr(np, op)(x, axis=axis, keepdims=keepdims)
    case2(name, op, [x], np.asarray(y), {"axis": axis, "keepdims": keepdims}, SIMPLE, "float32", f"np.{op}")


med("median/vector_odd", "median", QV13, None)
med("median/vector_even", "median", f32(QV13[:12]), None)
med("median/all", "median", X, None)
med("median/axis0", "median", X, 0)
med("median/axis1_keepdims", "median", X, 1, True)
med("median/nan_axis0", "median", XN, 0)
med("nanmedian/vector", "nanmedian", QVN, None)
med("nanmedian/all", "nanmedian", XN, None)
med("nanmedian/axis0", "nanmedian", XN, 0)
med("nanmedian/axis1_keepdims", "nanmedian", XN, 1, True)  # rows of 4 numbers (even), row 3 all NaN
med("nanmedian/axis-1", "nanmedian", XN, -1)

# ------------------------------------------------------------------ unique
U13 = f32([3, -1.5, 3, 0, NAN, 2.25, -1.5, 0, -0.0, NAN, 7, 3, 0.5])
UM = f32(np.round(X))  # [7, 5] of few distinct values
UI = i32(np.arange(35).reshape(7, 5) * 7 % 11 - 4)


def unique_ref(x, size, fill_value):
    u = np.unique(np.asarray(x).ravel())  # sorted; NaNs one value (equal_nan)
    assert np.isnan(u).sum() <= 1 if u.dtype.kind == "f" else True
    fill = u[0] if fill_value is None else fill_value
    out = np.concatenate([u[:size], np.full(max(0, size - len(u)), fill, u.dtype)])
    return out, len(u)


for name, x, extra, fill in [("vector", U13, None, None), ("matrix", UM, None, None), ("int32", UI, None, None)]:
    n = unique_ref(x, 0, None)[1]
    for sname, size, fv in [("size_pad", n + 4, None), ("size_pad_fill", n + 3, -9.0), ("size_equal", n, None),
                            ("size_short", n - 3, None)]:
        case2(f"unique/{name}_{sname}", "unique", [x], unique_ref(x, size, fv)[0], {"size": size, "fill_value": fv},
              EXACT, dtype_of(x), "np.unique (equal_nan), then JAX's size: padded with fill_value "
              "(default: the smallest unique value) or cut")

# ------------------------------------------------------------------ nonzero, argwhere, flatnonzero
NZ13 = f32([0, 1.5, 0, -0.0, NAN, -2, 0, 0, INF, 3, 0, 0.25, 0])  # NaN is nonzero, -0.0 is zero
NZM = f32(np.where(np.abs(X) < 1.3, 0.0, X))
NZM[1, 2] = NAN


def pad_rows(idx, size, fill):
    """nonzero's index arrays cut or padded to size with fill."""
    return [np.concatenate([i[:size], np.full(max(0, size - len(i)), fill, np.int64)]) for i in idx]


for name, x in [("vector", NZ13), ("matrix", NZM)]:
    n = int(np.count_nonzero(x))
    for sname, size, fv in [("pad", n + 4, None), ("pad_fill", n + 2, -1), ("equal", n, None), ("short", n - 2, None)]:
        kw = {"size": size, "fill_value": fv}
        idx = pad_rows(np.nonzero(x), size, 0 if fv is None else fv)
        for k, i in enumerate(idx):
            case2(f"nonzero/{name}_{sname}_{k}", "nonzero", [x], i, {**kw, "output": k}, EXACT, "int32",
                  "np.nonzero, then JAX's size: padded with fill_value (default 0) or cut")
        case2(f"argwhere/{name}_{sname}", "argwhere", [x], np.stack(idx, axis=1), kw, EXACT, "int32",
              "np.argwhere, then JAX's size and fill_value")
        case2(f"flatnonzero/{name}_{sname}", "flatnonzero", [x],
              pad_rows([np.flatnonzero(x)], size, 0 if fv is None else fv)[0], kw, EXACT, "int32",
              "np.flatnonzero, then JAX's size and fill_value")

# ------------------------------------------------------------------ lax.associative_scan
AS13 = f32([3, -1.5, 0.25, 2.25, -4, 5.5, 1, -0.25, 0, 7, -2.5, 0.5, 6])
ASI = i32([5, -3, 2, 8, -1, 0, 4, 7, -6, 1, 3, -2, 9])
SCAN_FNS = {"add": np.add, "maximum": np.maximum}


def assoc(name, x, fn, reverse, axis):
    f = SCAN_FNS[fn]
    y = np.flip(f.accumulate(np.flip(x, axis), axis), axis) if reverse else f.accumulate(x, axis)
    case2(name, "lax.associative_scan", [x], y, {"fn": fn, "reverse": reverse, "axis": axis},
          SIMPLE if fn == "add" and dtype_of(x) == "float32" else EXACT, dtype_of(x),
          f"np.{f.__name__}.accumulate" + (" of the reversed array, reversed" if reverse else ""))


for fn in SCAN_FNS:
    for rev in (False, True):
        r = "_reverse" if rev else ""
        for n in (1, 2, 7, 8, 13):
            assoc(f"lax.associative_scan/{fn}_n{n}{r}", f32(AS13[:n]), fn, rev, 0)
        assoc(f"lax.associative_scan/{fn}_axis0{r}", X, fn, rev, 0)
        assoc(f"lax.associative_scan/{fn}_axis1{r}", X, fn, rev, 1)
        assoc(f"lax.associative_scan/{fn}_nan{r}", VNAN, fn, rev, 0)
        assoc(f"lax.associative_scan/{fn}_int32{r}", ASI, fn, rev, 0)

# ------------------------------------------------------------------ lax.reduce
REDUCE_FNS = {"add": np.sum, "max": np.max, "multiply": np.prod}
IDENTITY = {"add": 0.0, "max": -INF, "multiply": 1.0}
RI = i32(np.arange(35).reshape(7, 5) % 7 - 3)


def lreduce(name, x, fn, dims, init=None):
    init = IDENTITY[fn] if init is None else init
    y = REDUCE_FNS[fn](x, axis=tuple(dims))
    y = {"add": np.add, "max": np.maximum, "multiply": np.multiply}[fn](y, init)  # the init folded in once
    case2(name, "lax.reduce", [x], np.asarray(y), {"fn": fn, "init": enc(init), "dimensions": dims},
          EXACT if fn == "max" or dtype_of(x) == "int32" else SIMPLE, dtype_of(x), f"np.{REDUCE_FNS[fn].__name__}")


for fn in REDUCE_FNS:
    xin = XP if fn == "multiply" else X
    lreduce(f"lax.reduce/{fn}_vector", AS13, fn, [0])
    lreduce(f"lax.reduce/{fn}_axis0", xin, fn, [0])
    lreduce(f"lax.reduce/{fn}_axis1", xin, fn, [1])
    lreduce(f"lax.reduce/{fn}_all", xin, fn, [0, 1])
lreduce("lax.reduce/max_nan_axis1", XN, "max", [1])
lreduce("lax.reduce/max_init0_axis1", X, "max", [1], 0.0)
lreduce("lax.reduce/add_int32_axis0", RI, "add", [0])
lreduce("lax.reduce/multiply_int32_axis1", RI, "multiply", [1])

out2 = {
    "comment": ("Written by tools/numpy_reference.py (NumPy " + np.__version__ + "); do not edit. Non-finite numbers "
                "are the strings \"nan\", \"inf\", \"-inf\"."),
    "cases": cases2,
}
path2 = sys.argv[2] if len(sys.argv) > 2 else os.path.join(os.path.dirname(path), "surface2.json")
with open(path2, "w") as f:
    json.dump(out2, f, indent=None, allow_nan=False, separators=(",", ":"))
    f.write("\n")
print(f"{path2}: {len(cases2)} cases")

# ====================================================================== surface3.json
# "More of jax.numpy" (dsl/tessel/numpy.hpp): Array API spellings and aliases,
# fmax/fmin, modf, i0, creation and index helpers, windows, polynomials,
# convolve/correlate, statistics (cov, corrcoef, gradient, unwrap, interp,
# trapezoid), insert/delete, lexsort, sort_complex, select/choose, splitting,
# block, the set functions and extract/compress/trim_zeros, read by
# tests/dsl/surface_ref3_test.cpp; a file of its own, as surface2.json.
#
# The same encoding as surface2.json, except that an input may also be
# "bool" (the C++ test builds it from 0/1) and that a case with no inputs
# ("inputs": []) is a constructor (logspace, indices, the windows, ...).
# Functions of several outputs (modf, the *_indices, unravel_index, the
# splits, unstack, broadcast_arrays) have one case per output, chosen by
# the kwarg "output", with "n_outputs" the number of arrays the function
# must return; sort_complex's result (complex64) is checked through its
# real and imaginary parts ("output": "real" / "imag").
#
# The group "eager" holds the functions that are eager-only in tessel (their
# result's size depends on the values): trim_zeros, compress, extract
# without size and the set functions without size. Its cases are checked
# eagerly, and jit of the same lambda must throw ts::ConcretizationError;
# they are never run through check_op.
#
# "grad_cases": as surface.json's (float64, central differences of the
# NumPy/SciPy function, h = 1e-6, tol 1e-5), with "wrt": the indices of the
# inputs differentiated (the others are held fixed).
#
# Where JAX and NumPy differ the reference is JAX's, said at the case:
#   - modf: JAX's fractional part is x - whole, NaN at +-inf (NumPy: +-0):
#     no infinities in its inputs.
#   - i0: JAX computes exp(|x|) * i0e(|x|) in float32: it overflows to inf
#     from |x| ~ 88.7 where float64 is still below float32's max (~91), so
#     no input in (88, 92); i0(+-inf) is NaN in both (left out anyway).
#   - around(decimals < 0): JAX multiplies by float32(10^d) (NumPy divides
#     by 10^-d); the inputs are chosen where both agree (asserted), and the
#     reference is NumPy's own float32 computation (x * 10^d rounded in
#     float32 matters at ties: 2.45 rounds to 2.4 in float32, 2.5 in float64).
#   - unravel_index: JAX accepts negative indices (-1 is the last element)
#     and clips out-of-bounds ones (all dims to their last index above,
#     to 0 below -size); NumPy raises. The reference is JAX's rule.
#   - ravel_multi_index, choose: only the modes "clip" and "wrap" (JAX's
#     "raise", the default of both, cannot run under jit).
#   - convolve, correlate, polymul, polyder, polyint promote integers to
#     float32 in JAX (NumPy keeps integers): the int32 cases expect float32.
#   - the set functions with size pad as JAX: union1d with the smallest
#     value (unique's default), intersect1d and setxor1d with the smallest
#     result, setdiff1d with 0; an explicit fill_value otherwise. No NaNs
#     in their inputs (NaN never equals NaN: setxor1d keeps two of them).
#   - extract with size: JAX's compress: the first `size` selected values,
#     then fill_value (default 0); size <= the number of elements.
#   - insert with a scalar index: values get leading unit dims up to x's
#     rank and their first axis moves to `axis` (NumPy's and JAX's rule):
#     values [k, rows] along axis 1 insert k columns.
cases3 = []
names3 = set()
GROUPS3 = {
    "elementwise": {"absolute", "acos", "acosh", "asin", "asinh", "atan", "atanh", "atan2", "around", "rint", "fmax",
                    "fmin", "modf", "i0", "isreal", "iscomplex"},
    "creation": {"logspace", "geomspace", "indices", "diag_indices", "tril_indices", "triu_indices", "diagflat",
                 "vander", "bartlett", "blackman", "hamming", "hanning", "kaiser", "resize"},
    "indexing": {"unravel_index", "ravel_multi_index", "fill_diagonal", "insert", "delete_", "select", "choose",
                 "lexsort", "sort_complex", "extract", "compress", "place"},
    "poly": {"polyval", "polyadd", "polysub", "polymul", "polyder", "polyint", "convolve", "correlate", "poly",
             "polydiv"},
    "stats": {"ediff1d", "trapezoid", "vecdot", "matvec", "vecmat", "cov", "corrcoef", "gradient", "gradient_axes",
              "unwrap", "interp"},
    "shapes": {"block", "array_split", "hsplit", "vsplit", "dsplit", "unstack", "matrix_transpose", "permute_dims",
               "concat", "broadcast_arrays", "array_equal", "array_equiv"},
    "sets": {"union1d", "intersect1d", "setdiff1d", "setxor1d"},
}
EAGER_ONLY = {"trim_zeros", "compress", "extract", "union1d", "intersect1d", "setdiff1d", "setxor1d"}


def group3_of(op):
    """The TEST_CASE of surface_ref3_test.cpp that runs a case with a static size."""
    groups = [g for g, ops in GROUPS3.items() if op in ops]
    assert len(groups) == 1, op
    return groups[0]


def b8(values, shape=None):
    a = np.asarray(values, dtype=bool)
    return a.reshape(shape) if shape is not None else a


def enc_input3(x):
    if np.asarray(x).dtype == np.bool_:
        return enc_array(x, "bool")
    return enc_input(x)


def case3(name, op, inputs, expected, kwargs=None, tol=EXACT, dtype="float32", source="", group=None):
    assert name not in names3, name
    names3.add(name)
    if group is None:
        group = group3_of(op)
    assert group != "eager" or op in EAGER_ONLY, (name, op)
    if dtype == "float32":
        expected = as_float32_result(expected)
    cases3.append({
        "name": name,
        "op": op,
        "group": group,
        "source": source,
        "inputs": [enc_input3(x) for x in inputs],
        "kwargs": kwargs or {},
        "expected": enc_array(expected, dtype),
        "tol": tol,
    })


def multi3(name, op, inputs, outs, kwargs=None, tol=EXACT, dtype="float32", source="", group=None):
    """One case per output of a function of several outputs."""
    for k, o in enumerate(outs):
        case3(f"{name}_{k}", op, inputs, np.asarray(o), {**(kwargs or {}), "output": k, "n_outputs": len(outs)}, tol,
              dtype, source, group)


def u3(name, op, fn, x, tol=TRANS, dtype="float32", kwargs=None, source=""):
    x = x if isinstance(x, np.ndarray) else f32(x)
    with np.errstate(all="ignore"):
        y = fn(x)
    case3(name, op, [x], y, kwargs, tol, dtype, source or f"np.{op}")


def b3(name, op, fn, a, b, tol=TRANS, dtype="float32", kwargs=None, source=""):
    a = a if isinstance(a, np.ndarray) else f32(a)
    b = b if isinstance(b, np.ndarray) else f32(b)
    with np.errstate(all="ignore"):
        y = fn(a, b)
    case3(name, op, [a, b], y, kwargs, tol, dtype, source or f"np.{op}")


V5 = f32([1.5, -0.5, 2.0, 0.25, -3.0])
V7B = f32([0.5, -1.0, 2.0, 1.5, -0.25, 3.0, -2.0])

# ------------------------------------------------------------------ elementwise: the Array API spellings
ABS_IN = [-INF, -3.5, -1, -0.0, 0, 1e-30, 2.25, 1e30, INF, NAN, -F32_MAX, 7, -0.5]
u3("absolute/vector", "absolute", np.absolute, ABS_IN, EXACT)
u3("absolute/matrix", "absolute", np.absolute, X, EXACT)
ASIN_IN = [-1, -0.999, -0.5, -1e-4, 0, 1e-4, 0.3, 0.5, 0.999, 1, 1.5, -2, NAN]
u3("acos/vector", "acos", np.arccos, ASIN_IN)
u3("asin/vector", "asin", np.arcsin, ASIN_IN)
u3("asin/matrix", "asin", np.arcsin, f32(X / 4.0))
u3("acosh/vector", "acosh", np.arccosh, [1, 1.0001, 1.5, 2, 10, 1e4, INF, 0.999, 0.5, 0, -1, -INF, NAN])
u3("asinh/vector", "asinh", np.arcsinh, [-INF, -1e4, -10, -1, -0.5, -1e-4, 0, 1e-4, 0.5, 1, 10, 1e4, NAN])
u3("atan/vector", "atan", np.arctan, [-INF, -1e6, -10, -1, -0.5, -1e-4, 0, 1e-4, 0.5, 1, 10, INF, NAN])
u3("atan/matrix", "atan", np.arctan, X)
u3("atanh/vector", "atanh", np.arctanh, [-1, -0.999, -0.5, -1e-4, 0, 1e-4, 0.5, 0.999, 1, 1.5, -2, NAN, 0.25])
# Signed zeros: atan2(+-0, -0) = +-pi, atan2(+-0, +0) = +-0 (C99, XLA and NumPy).
ATA = [0, -0.0, 0, -0.0, 1, -1, 1, -1, INF, -INF, INF, NAN, 3, 2.5, -7, 1e-30, -INF]
ATB = [0, 0, -0.0, -0.0, 1, 1, -1, -1, INF, INF, -INF, 1, NAN, -4, 0, 1e30, 2]
b3("atan2/vector", "atan2", np.arctan2, ATA, ATB)
b3("atan2/broadcast_row", "atan2", np.arctan2, X, V5)

# ------------------------------------------------------------------ around, rint
ROUND_IN = [-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, -3.7, 2.2, 0, 4194304.5, INF, NAN]
u3("rint/vector", "rint", np.rint, ROUND_IN, EXACT, source="np.rint (half to even)")
u3("rint/matrix", "rint", np.rint, f32(X * 1.3), EXACT)


def around_ref(x, d):
    """NumPy's around on the float32 values (NumPy's float32 computation), after checking
    that JAX's (x * float32(10^d), rounded half to even, / float32(10^d), all float32) agrees."""
    x32 = np.asarray(x, np.float32)
    with np.errstate(all="ignore"):
        want = np.around(x32, d).astype(np.float64)
        f = np.float32(10.0 ** d)
        jax = (np.rint(x32 * f) / f).astype(np.float64)
    ok = np.isnan(want) == np.isnan(jax)
    fin = np.isfinite(want)
    assert ok.all() and np.array_equal(want[~fin & ~np.isnan(want)], jax[~fin & ~np.isnan(want)]), (x, d)
    assert np.all(np.abs(want[fin] - jax[fin]) <= SIMPLE * (1 + np.abs(want[fin]))), (d, want, jax)
    return want


for d, vals in [(0, ROUND_IN),
                (1, [0.25, -0.25, 0.75, 1.25, -1.75, 0.125, 3.14159, -2.71828, 0.0, 12.34, -0.05, INF, NAN]),
                (-1, [25, 35, -15, 14, 16, 1234.5, -5, 5, 0, 45, 55, -INF, NAN]),
                (2, [0.125, -0.375, 1.0625, 3.14159, -2.71828, 0.005, 99.999, -0.0, 1e-5, 7.0, 0.3333, -1.875, 12.5])]:
    x = f32(vals)
    case3(f"around/decimals{d}", "around", [x], around_ref(x, d), {"decimals": d}, EXACT if d == 0 else SIMPLE,
          source="np.around of float32 (half to even; JAX: x * 10^d rounded, / 10^d)")
case3("around/matrix_decimals1", "around", [f32(X * 1.37)], around_ref(f32(X * 1.37), 1), {"decimals": 1}, SIMPLE,
      source="np.around of float32")

# ------------------------------------------------------------------ fmax, fmin (NaN only where both are)
FA3 = [1, NAN, NAN, -INF, 3, -0.5, INF, 2, 0, -7, NAN, 5, 1e-30]
FB3 = [NAN, 2, NAN, 5, 3, -1.5, -INF, INF, 1, -7.5, -INF, 5, -1e-30]
VN5 = f32([NAN, 0.5, -1.0, NAN, 2.0])
for op, fn in (("fmax", np.fmax), ("fmin", np.fmin)):
    b3(f"{op}/vector", op, fn, FA3, FB3, EXACT)
    b3(f"{op}/matrix_broadcast", op, fn, XN, VN5, EXACT)

# ------------------------------------------------------------------ modf (no infinities: JAX's fraction is NaN there)
MODF_IN = f32([-3.75, -2.5, -1, -0.25, 0, 0.25, 1, 2.5, 3.75, 1e10, -7.125, NAN, 123.5])
multi3("modf/vector", "modf", [MODF_IN], np.modf(MODF_IN), {}, EXACT, source="np.modf: (fractional, integral)")
multi3("modf/matrix", "modf", [f32(X * 1.5)], np.modf(f32(X * 1.5)), {}, EXACT, source="np.modf")

# ------------------------------------------------------------------ i0 (no input in (88, 92): see above)
u3("i0/vector", "i0", np.i0, [-100, -20, -5, -1, -0.5, -1e-3, 0, 1e-3, 0.5, 1, 5, 20, 50, 85, 100, NAN],
   source="np.i0 (100: beyond float32, inf)")
u3("i0/matrix", "i0", np.i0, X)

# ------------------------------------------------------------------ isreal, iscomplex
u3("isreal/real", "isreal", np.isreal, XN, EXACT, "bool", {"complex": False})
u3("iscomplex/real", "iscomplex", np.iscomplex, XN, EXACT, "bool", {"complex": False})
def cplx(re, im):
    """re + i im, element by element (re + 1j * im would turn an infinite im into a NaN real part)."""
    z = np.empty(np.shape(re), np.complex128)
    z.real = re
    z.imag = im
    return z


CRE = f32([1, -2, 0, 3.5, NAN, 0, -1, 2, INF, 0.5, 7, -0.0, 4])
CIM = f32([0, 1, -0.0, 0, 0, NAN, 2.5, -1e-30, 0, INF, 0, 3, 0])
for op, fn in (("isreal", np.isreal), ("iscomplex", np.iscomplex)):
    case3(f"{op}/complex", op, [CRE, CIM], fn(cplx(CRE, CIM)), {"complex": True}, EXACT, "bool",
          f"np.{op} of re + i im (the C++ test builds ts::complex(re, im))")

# ------------------------------------------------------------------ creation (no inputs)
for name, a, b, num, ep, base in [("0_3_num7", 0.0, 3.0, 7, True, 10.0), ("-1_2_num13_noend", -1.0, 2.0, 13, False, 10.0),
                                  ("base2", -2.0, 3.0, 6, True, 2.0), ("descending", 1.0, -1.0, 5, True, 10.0)]:
    case3(f"logspace/{name}", "logspace", [], np.logspace(a, b, num, ep, base),
          {"start": a, "stop": b, "num": num, "endpoint": ep, "base": base}, TRANS, "float32", "np.logspace")
for name, a, b, num, ep in [("1_1000_num4", 1.0, 1000.0, 4, True), ("negative", -1.0, -16.0, 5, True),
                            ("noend", 2.0, 512.0, 8, False), ("0.5_100_num13", 0.5, 100.0, 13, True),
                            ("descending", 81.0, 1.0, 5, True)]:
    case3(f"geomspace/{name}", "geomspace", [], np.geomspace(a, b, num, ep),
          {"start": a, "stop": b, "num": num, "endpoint": ep}, TRANS, "float32",
          "np.geomspace (JAX: sign * logspace of log10|start|, log10|stop|)")
for dims in ([3, 4], [2, 3, 4], [13]):
    case3(f"indices/{'x'.join(map(str, dims))}", "indices", [], np.indices(dims), {"dimensions": dims}, EXACT, "int32",
          "np.indices (int32 in JAX)")
for n, nd in ((5, 2), (4, 3), (13, 1)):
    multi3(f"diag_indices/n{n}_ndim{nd}", "diag_indices", [], np.diag_indices(n, nd), {"n": n, "ndim": nd}, EXACT,
           "int32", "np.diag_indices")
for op in ("tril_indices", "triu_indices"):
    for n, k, m in ((4, 0, None), (4, -1, 6), (5, 1, 3), (7, 0, 5), (6, 2, None)):
        suffix = f"n{n}_k{k}" + (f"_m{m}" if m is not None else "")
        multi3(f"{op}/{suffix}", op, [], getattr(np, op)(n, k, m), {"n": n, "k": k, "m": m}, EXACT, "int32",
               f"np.{op}(n, k, m)")
D5_3 = f32([1, -2, 3, -4, 5])
KA3 = f32([[1, -2, 0.5], [0, 3, -1]])
for name, v, k in (("vector", D5_3, 0), ("vector_k2", D5_3, 2), ("vector_k-1", D5_3, -1), ("matrix_flattened", KA3, 0),
                   ("matrix_k-3", KA3, -3)):
    case3(f"diagflat/{name}", "diagflat", [v], np.diagflat(v, k), {"k": k}, EXACT, source="np.diagflat")
VX7 = f32([-2, -1, -0.5, 0, 0.5, 1.5, 3])
VXI = i32([-3, -1, 0, 1, 2, 4, 5])
for name, x, n, inc in (("default", VX7, None, False), ("increasing", VX7, None, True), ("n4", VX7, 4, False),
                        ("n9_increasing", VX7, 9, True), ("int32", VXI, None, False), ("int32_n3_increasing", VXI, 3, True)):
    case3(f"vander/{name}", "vander", [x], np.vander(x, n, inc), {"N": n, "increasing": inc}, SIMPLE if name[:3] != "int" else EXACT,
          dtype_of(x), "np.vander (JAX: power(x, iota); float powers need not be exact)")
for M in (1, 7, 12, 13):
    for op in ("bartlett", "blackman", "hamming", "hanning"):
        case3(f"{op}/M{M}", op, [], getattr(np, op)(M), {"M": M}, TRANS, "float32", f"np.{op}")
for M, beta in ((1, 3.0), (12, 0.0), (13, 5.0), (7, 14.0), (20, 8.6)):
    case3(f"kaiser/M{M}_beta{beta}", "kaiser", [], np.kaiser(M, beta), {"M": M, "beta": beta}, TRANS, "float32", "np.kaiser")
RI75 = i32(np.arange(35).reshape(7, 5) % 11 - 5)
for name, x, shape in (("matrix_grow", X, [4, 9]), ("vector_shrink", V13, [3, 3]), ("vector_grow", V13, [2, 20]),
                       ("int32", RI75, [5, 5]), ("to_3d", X, [2, 3, 7])):
    case3(f"resize/{name}", "resize", [x], np.resize(x, shape), {"new_shape": shape}, EXACT, dtype_of(x),
          "np.resize (repeats the flattened input)")


# ------------------------------------------------------------------ unravel_index, ravel_multi_index
def jax_unravel(idx, shape):
    """jnp.unravel_index: floor divmod from the last dim; then an index left above 0 (too
    large) gives every dim its last index and one below -1 (below -size) gives 0."""
    idx = np.asarray(idx, np.int64)
    rest, outs = idx, [None] * len(shape)
    for d in reversed(range(len(shape))):
        rest, outs[d] = np.divmod(rest, shape[d])
    out = [np.where(rest > 0, s - 1, np.where(rest < -1, 0, o)) for s, o in zip(shape, outs)]
    size = int(np.prod(shape))
    inb = (idx >= -size) & (idx < size)
    ref = np.unravel_index(np.where(inb, idx % size, 0), shape)  # self-check: in bounds it is NumPy's (of idx mod size)
    for o, r in zip(out, ref):
        assert np.array_equal(o[inb], r[inb])
    return out


UI13 = i32([0, 1, 4, 5, 17, 34, 33, -1, -5, -35, 12, 29, 7])
multi3("unravel_index/7x5", "unravel_index", [UI13], jax_unravel(UI13, (7, 5)), {"shape": [7, 5]}, EXACT, "int32",
       "np.unravel_index; negative indices as JAX (-1 is the last element)")
UIM = i32((np.arange(35).reshape(7, 5) * 7) % 120 - 60)
multi3("unravel_index/3x4x5_matrix", "unravel_index", [UIM], jax_unravel(UIM, (3, 4, 5)), {"shape": [3, 4, 5]}, EXACT,
       "int32", "np.unravel_index; negative indices as JAX")
UIO = i32([35, 40, 100, -36, -100, 0, 34, -1, 3, 70, -35, 2, 36])
multi3("unravel_index/out_of_bounds_clipped", "unravel_index", [UIO], jax_unravel(UIO, (7, 5)), {"shape": [7, 5]}, EXACT,
       "int32", "JAX's rule (NumPy raises): >= size -> the last index of every dim, < -size -> 0")
RMI_R = i32([0, 6, 3, -1, 7, 2, 10, 5, -4, 1, 6, 0, 4])
RMI_C = i32([0, 4, 2, 3, -2, 5, 1, 9, 0, -1, 4, 3, 2])
for mode in ("clip", "wrap"):
    case3(f"ravel_multi_index/7x5_{mode}", "ravel_multi_index", [RMI_R, RMI_C],
          np.ravel_multi_index((RMI_R, RMI_C), (7, 5), mode=mode), {"dims": [7, 5], "mode": mode}, EXACT, "int32",
          f"np.ravel_multi_index(mode='{mode}')")
RMI3 = [i32(np.arange(35).reshape(7, 5) % 4 - 1), i32(np.arange(35).reshape(7, 5) % 5), i32(np.arange(35).reshape(7, 5) % 7 - 1)]
for mode in ("clip", "wrap"):
    case3(f"ravel_multi_index/3x4x5_{mode}", "ravel_multi_index", RMI3,
          np.ravel_multi_index(tuple(RMI3), (3, 4, 5), mode=mode), {"dims": [3, 4, 5], "mode": mode}, EXACT, "int32",
          f"np.ravel_multi_index(mode='{mode}')")


# ------------------------------------------------------------------ fill_diagonal (2-D, wrap false)
def fill_diag(a, val):
    b = np.array(a, copy=True)
    np.fill_diagonal(b, val, wrap=False)
    return b


for name, a, val in (("tall", X, 9.5), ("wide", f32(X.T), -1.0), ("square", f32(X[:5]), 0.0),
                     ("nan_matrix", XN, 2.5)):
    case3(f"fill_diagonal/{name}", "fill_diagonal", [a], fill_diag(a, val), {"val": val, "wrap": False}, EXACT,
          source="np.fill_diagonal(wrap=False) on a copy")

# ------------------------------------------------------------------ insert, delete
SC = f32(np.array(7.5))
for name, x, index, values, axis in (("row_axis0", X, 2, V5, 0), ("column_axis1_neg", X, -1, V7B, 1),
                                     ("scalar_axis1", X, 3, SC, 1), ("flat", X, 5, f32([10, 20, 30]), None),
                                     ("vector_end", V13, 13, f32([1, 2]), None), ("vector_start", V13, 0, SC, 0),
                                     ("int32_axis0", RI75, 7, i32([9, 9, 9, 9, 9]), 0),
                                     ("same_rank_axis1", X, 2, f32(np.arange(14).reshape(2, 7) * 0.5), 1),
                                     ("same_rank_axis0", X, 7, f32(np.arange(10).reshape(2, 5) - 3.0), 0),
                                     ("row_broadcast_axis1", X, 0, f32([[1.0], [2.0]]), 1)):
    case3(f"insert/{name}", "insert", [x, values], np.insert(x, index, values, axis), {"index": index, "axis": axis},
          EXACT, dtype_of(x), "np.insert with a scalar index")
for name, x, index, axis in (("axis0", X, 2, 0), ("axis1_neg", X, -1, 1), ("flat", X, 10, None), ("vector_first", V13, 0, 0),
                             ("vector_last", V13, 12, None), ("int32_axis1", RI75, 0, 1)):
    case3(f"delete_/{name}", "delete_", [x], np.delete(x, index, axis), {"index": index, "axis": axis}, EXACT,
          dtype_of(x), "np.delete with a scalar index")

# place: the true positions of mask take vals in turn, cycling.
def place_ref(arr, mask, vals):
    out = arr.copy()
    np.place(out, mask, vals)
    return out


for name, arr, mask, vals in (("matrix_cycle", X, b8(np.abs(X) > 1.0), f32([10, 20, 30])),
                              ("vector_exact", V13, b8(np.arange(13) % 4 == 1), f32([-1, -2, -3])),
                              ("none", V13, b8(np.zeros(13)), f32([5])),
                              ("int32_scalar_vals", RI75, b8(RI75 > 0), i32([0]))):
    case3(f"place/{name}", "place", [arr, mask, vals], place_ref(arr, mask, vals), {}, EXACT, dtype_of(arr),
          "np.place on a copy")

# ------------------------------------------------------------------ select, choose
SC1 = b8(X > 1.0)
SC2 = b8(X < 0.5)
SC3 = b8(np.abs(X) == 0.0)
CH1, CH2, CH3 = X, f32(X * -2.0 + 1.0), f32(np.tile(V5, (7, 1)))
for name, conds, chs, default in (("two", [SC1, SC2], [CH1, CH2], 0.0), ("two_default", [SC1, SC2], [CH1, CH2], -1.5),
                                  ("three", [SC3, SC1, SC2], [CH3, CH1, CH2], 9.0),
                                  ("broadcast_choice", [SC1, SC2], [V5, CH2], 0.5)):
    case3(f"select/{name}", "select", conds + chs, np.select(conds, chs, default), {"n": len(conds), "default": default},
          EXACT, source="np.select: the first true condition's choice, else default")
CA = i32([[0, 1, 2, -1, 3], [4, 2, 1, 0, 0], [-2, 2, 1, 1, 5], [1, 0, 2, 2, 1], [3, -3, 0, 1, 2], [2, 2, 2, 0, 1],
          [0, 0, 1, 6, -1]])
CA13 = i32([0, 1, 2, 3, -1, 4, 5, -6, 2, 1, 0, 3, 7])
CC13 = [f32(np.arange(13) * 1.0 + 100 * k) for k in range(4)]
for mode in ("clip", "wrap"):
    case3(f"choose/matrix_{mode}", "choose", [CA, CH1, CH2, CH3], np.choose(CA, [CH1, CH2, CH3], mode=mode),
          {"mode": mode}, EXACT, source=f"np.choose(mode='{mode}')")
    case3(f"choose/broadcast_{mode}", "choose", [CA, CH1, V5], np.choose(CA, [CH1, V5], mode=mode), {"mode": mode},
          EXACT, source=f"np.choose(mode='{mode}'), a choice broadcast")
    case3(f"choose/vector_{mode}", "choose", [CA13] + CC13, np.choose(CA13, CC13, mode=mode), {"mode": mode}, EXACT,
          source=f"np.choose(mode='{mode}')")

# ------------------------------------------------------------------ lexsort, sort_complex
LXA = f32([2, 1, 2, NAN, 1, 0, 2, 1, -0.0, 0, NAN, 1, -INF])
LXB = f32([5, 3, 1, 0, 3, 9, 1, 7, 2, 1, 4, 2, 6])
LXC = i32([1, 1, 0, 0, 1, 0, 1, 0, 0, 1, 1, 1, 0])
LXM1 = f32(np.round(X))
LXM2 = i32(np.arange(35).reshape(7, 5) % 3)
for name, keys, axis in (("one_key", [LXA], -1), ("two_keys", [LXB, LXA], -1), ("three_keys_int", [LXB, LXA, LXC], -1),
                         ("matrix_axis-1", [LXM2, LXM1], -1), ("matrix_axis0", [LXM2, LXM1], 0),
                         ("matrix_int_primary_axis0", [LXM1, LXM2], 0)):
    case3(f"lexsort/{name}", "lexsort", keys, np.lexsort(keys, axis), {"axis": axis}, EXACT, "int32",
          "np.lexsort: the last key primary, stable; NaNs last, -0.0 == 0")
SCR = f32([3.0, -1.5, 0.0, 2.25, -4.0, 3.0, 1.0, -0.25, 0.0, 7.0, -2.5, 0.5, -1.5])
SCI = f32([1.0, 2.0, -1.0, 0.0, 5.0, -2.0, 0.5, 0.0, 3.0, -7.0, 1.5, 0.0, -2.0])
for name, ins, z, cplx in (("real_vector", [SCR], SCR, False), ("real_matrix", [X], X, False),
                           ("complex_vector", [SCR, SCI], cplx(SCR, SCI), True)):
    s = np.sort_complex(z)
    for part, v in (("real", s.real), ("imag", s.imag)):
        case3(f"sort_complex/{name}_{part}", "sort_complex", ins, v, {"complex": cplx, "output": part}, EXACT, "float32",
              "np.sort_complex (by real part, then imaginary; complex64 in JAX)")

# ------------------------------------------------------------------ extract with size (JAX's; without: "eager" below)
EXC = b8(np.abs(X) > 1.2)
EXC13 = b8([1, 0, 0, 1, 1, 0, 1, 0, 0, 1, 1, 0, 1])


def extract_ref(cond, arr, size, fill):
    e = np.extract(cond, arr)
    return np.concatenate([e[:size], np.full(max(0, size - len(e)), fill, np.float64)])


for name, cond, arr in (("matrix", EXC, X), ("vector", EXC13, V13)):
    n = int(np.count_nonzero(cond))
    for sname, size, fill in (("pad", n + 3, 0), ("pad_fill", n + 2, -1), ("equal", n, 0), ("short", n - 3, 0)):
        case3(f"extract/{name}_size_{sname}", "extract", [cond, arr], extract_ref(cond, arr, size, fill),
              {"size": size, "fill_value": fill}, EXACT, source="np.extract, then JAX's size: padded with fill_value or cut")

# compress with a static size (JAX's): the selected slices, then fill_value.
def compress_ref(cond, arr, axis, size, fill):
    c = np.compress(cond, arr, axis)
    ax = 0 if axis is None else axis % arr.ndim
    n = c.shape[ax]
    if n >= size:
        return np.take(c, np.arange(size), axis=ax)
    pad = list(c.shape)
    pad[ax] = size - n
    return np.concatenate([c, np.full(pad, fill, c.dtype)], axis=ax)


for name, cond, arr, axis, size, fill in (("axis0_pad", b8([1, 0, 1, 1, 0, 0, 1]), X, 0, 6, 0),
                                          ("axis1_short_cut", b8([0, 1, 1]), X, 1, 1, 0),
                                          ("flat_fill", b8(np.arange(13) % 3 == 0), X, None, 7, -2),
                                          ("axis-1_equal", b8([1, 0, 0, 1, 1]), X, -1, 3, 0),
                                          ("long_condition", b8([1, 0, 1, 0, 0, 0, 0, 0, 0]), X, 0, 3, 9)):
    case3(f"compress/{name}_size", "compress", [cond, arr], compress_ref(cond, arr, axis, size, fill),
          {"axis": axis, "size": size, "fill_value": fill}, EXACT,
          source="np.compress, then JAX's size: padded with fill_value or cut")

# ------------------------------------------------------------------ polynomials
P4 = f32([0.5, -1.25, 2.0, 0.75])
P6 = f32([0.125, 0, -0.5, 1.0, -2.0, 0.25])
PI4 = i32([2, -1, 0, 3])
XI13 = i32([-3, -2, -1, 0, 1, 2, 3, 4, 5, -4, 6, 7, -5])
for name, p, x in (("vector", P4, V13), ("matrix", P6, f32(X / 2)), ("int32", PI4, XI13), ("constant", f32([2.5]), V13),
                   ("int_p_float_x", PI4, V13)):
    case3(f"polyval/{name}", "polyval", [p, x], np.polyval(p, x), {}, SIMPLE if name != "int32" else EXACT,
          "int32" if name == "int32" else "float32", "np.polyval (Horner)")
QA, QB = f32([1.5, -2, 0.5, 3, -1]), f32([4, -0.25, 2])
QIA, QIB = i32([3, -1, 2]), i32([1, 0, -4, 5, 2])
for op, fn in (("polyadd", np.polyadd), ("polysub", np.polysub)):
    case3(f"{op}/longer_first", op, [QA, QB], fn(QA, QB), {}, SIMPLE, source=f"np.{op}")
    case3(f"{op}/longer_second", op, [QB, QA], fn(QB, QA), {}, SIMPLE, source=f"np.{op}")
    case3(f"{op}/int32", op, [QIA, QIB], fn(QIA, QIB), {}, EXACT, "int32", f"np.{op} (int32 stays int32)")
case3("polymul/float", "polymul", [QA, QB], np.polymul(QA, QB), {}, SIMPLE, source="np.polymul")
case3("polymul/int32", "polymul", [QIA, QIB], np.polymul(QIA, QIB).astype(np.float64), {}, EXACT, "float32",
      "np.polymul; JAX promotes integers to float32 (promote_dtypes_inexact)")
for m in (1, 2, 3):
    case3(f"polyder/m{m}", "polyder", [P6], np.polyder(P6, m), {"m": m}, SIMPLE, source="np.polyder")
case3("polyder/int32", "polyder", [i32([3, -2, 5, 1, 4])], np.polyder(i32([3, -2, 5, 1, 4])).astype(np.float64), {"m": 1},
      EXACT, "float32", "np.polyder; JAX promotes integers to float32")
for name, p, m, k in (("m1", P4, 1, 0.0), ("m2_k1.5", P4, 2, 1.5), ("m1_k-2", P6, 1, -2.0), ("int32", PI4, 1, 0.0)):
    case3(f"polyint/{name}", "polyint", [p], np.polyint(p, m, k), {"m": m, "k": k}, SIMPLE, "float32",
          "np.polyint (k appended at every integration); float32 in JAX for int32")

# poly: the coefficients of prod (x - z); polydiv: JAX's remainder keeps
# u's length (NumPy trims it: here padded back with its leading zeros).
for name, z in (("vector", f32([0.5, -1.25, 2.0, 3.0])), ("repeated", f32([1.0, 1.0, -2.0])), ("one", f32([2.5])),
                ("int32", i32([1, -2, 3]))):
    case3(f"poly/{name}", "poly", [z], np.poly(z), {}, SIMPLE, "float32", "np.poly of a 1-D array of zeros")


def polydiv_ref(u, v):
    q, r = np.polydiv(np.asarray(u, np.float64), np.asarray(v, np.float64))
    return [q, np.concatenate([np.zeros(len(u) - len(r)), r])]


for name, u, v in (("exact", np.polymul(f32([1.0, -2.0, 0.5]), f32([2.0, 1.0])), f32([2.0, 1.0])),
                   ("remainder", f32([3.0, -1.0, 2.0, 0.5, 4.0]), f32([1.5, -0.5, 2.0])),
                   ("constant_divisor", f32([1.0, 2.0, 3.0]), f32([4.0])), ("int32", i32([6, -3, 2, 9]), i32([2, 1]))):
    multi3(f"polydiv/{name}", "polydiv", [u, v], polydiv_ref(u, v), {}, 1e-5, "float32",
           "np.polydiv (the remainder padded to u's length, as JAX's)")

# ------------------------------------------------------------------ convolve, correlate
CV13 = f32([1, -2, 0.5, 3, 0, -1.5, 2, 4, -0.25, 1, 0, 2.5, -3])
CV4 = f32([0.5, -1, 2, 0.25])
CV5 = f32([1, 0.5, -2, 0, 1.5])
CV6 = f32([2, -1, 0.5, 1, -0.5, 3])
for op in ("convolve", "correlate"):
    npf = getattr(np, op)
    for name, a, v in (("a13_v4", CV13, CV4), ("a13_v5", CV13, CV5), ("a4_v13", CV4, CV13), ("a5_v13", CV5, CV13),
                       ("a4_v6", CV4, CV6), ("a6_v6", CV6, f32(CV6[::-1] * 0.5))):
        for mode in ("full", "same", "valid"):
            case3(f"{op}/{name}_{mode}", op, [a, v], npf(a, v, mode), {"mode": mode}, SIMPLE,
                  source=f"np.{op}(mode='{mode}') (JAX's agrees, v longer included)")
    ai, vi = i32([1, -2, 3, 0, 4, -1, 2]), i32([2, 0, -1])
    case3(f"{op}/int32_full", op, [ai, vi], npf(ai, vi, "full").astype(np.float64), {"mode": "full"}, EXACT, "float32",
          f"np.{op}; JAX promotes integers to float32")

# ------------------------------------------------------------------ ediff1d, trapezoid, vecdot, matvec, vecmat
case3("ediff1d/vector", "ediff1d", [V13], np.ediff1d(V13), {}, SIMPLE, source="np.ediff1d")
case3("ediff1d/matrix_flattened", "ediff1d", [X], np.ediff1d(X), {}, SIMPLE, source="np.ediff1d (flattened)")
TX13 = f32([0, 0.5, 0.75, 1.5, 2, 2.25, 3, 4, 4.5, 5, 6.5, 7, 8])
TX7 = f32([-1, 0, 0.5, 2, 2.25, 3, 5])
TX5 = f32([0, 0.25, 1, 1.5, 3])
TX75 = f32(np.cumsum(np.abs(X) + 0.25, axis=1))
for name, y, dx, axis in (("dx/vector", V13, 0.5, -1), ("dx/matrix_axis0", X, 1.0, 0), ("dx/matrix_axis-1", X, 2.0, -1)):
    case3(f"trapezoid/{name}", "trapezoid", [y], np.trapz(y, dx=dx, axis=axis), {"dx": dx, "axis": axis}, SIMPLE,
          source="np.trapz (dx)")
for name, y, x, axis in (("x/vector", V13, TX13, -1), ("x/matrix_axis0", X, TX7, 0), ("x/matrix_axis-1", X, TX5, -1),
                         ("x/matrix_x2d_axis1", X, TX75, 1)):
    case3(f"trapezoid/{name}", "trapezoid", [y, x], np.trapz(y, x, axis=axis), {"axis": axis}, SIMPLE,
          source="np.trapz (x)")
Y75 = f32(np.cos(np.arange(35).reshape(7, 5)) * 2).round(2).astype(np.float32).astype(np.float64)
Y75 = f32(Y75)
for name, a, b, axis in (("axis-1", X, Y75, -1), ("axis0", X, Y75, 0), ("broadcast", X, V5, -1), ("vector", V13, CV13, 0)):
    case3(f"vecdot/{name}", "vecdot", [a, b], np.sum(a * b, axis=axis), {"axis": axis}, SIMPLE,
          source="sum(conj(a) * b, axis) (np.vecdot, NumPy 2)")
V34 = f32(np.arange(28).reshape(7, 4) * 0.25 - 3)
V73 = f32(np.arange(21).reshape(7, 3) * -0.5 + 4)
case3("matvec/matrix", "matvec", [X, V5], np.einsum("...ij,...j->...i", X, V5), {}, SIMPLE, source="np.matvec")
case3("matvec/batched", "matvec", [X3, V34], np.einsum("...ij,...j->...i", X3, V34), {}, SIMPLE, source="np.matvec")
case3("vecmat/matrix", "vecmat", [V7B, X], np.einsum("...i,...ij->...j", V7B, X), {}, SIMPLE, source="np.vecmat")
case3("vecmat/batched", "vecmat", [V73, X3], np.einsum("...i,...ij->...j", V73, X3), {}, SIMPLE, source="np.vecmat")

# ------------------------------------------------------------------ cov, corrcoef
for name, m, rowvar, bias, ddof in (("rows", X, True, False, None), ("columns", X, False, False, None),
                                    ("rows_ddof0", X, True, False, 0), ("columns_bias", X, False, True, None),
                                    ("rows_ddof2", X, True, False, 2), ("vector", V13, True, False, None),
                                    ("vector_bias", V13, False, True, None)):
    case3(f"cov/{name}", "cov", [m], np.cov(m, rowvar=rowvar, bias=bias, ddof=ddof),
          {"rowvar": rowvar, "bias": bias, "ddof": ddof}, SIMPLE, source="np.cov")
for name, m, rowvar in (("rows", X, True), ("columns", X, False), ("vector", V13, True)):
    case3(f"corrcoef/{name}", "corrcoef", [m], np.corrcoef(m, rowvar=rowvar), {"rowvar": rowvar}, SIMPLE,
          source="np.corrcoef (clipped to [-1, 1] in JAX)")

# ------------------------------------------------------------------ gradient, unwrap, interp
for name, f, dx, axis in (("vector", V13, 1.0, -1), ("vector_dx0.5", V13, 0.5, -1), ("matrix_axis0_dx2", X, 2.0, 0),
                          ("matrix_axis-1", X, 1.0, -1), ("two_points", f32(X[:, :2]), 0.25, 1)):
    case3(f"gradient/{name}", "gradient", [f], np.gradient(f, dx, axis=axis), {"dx": dx, "axis": axis}, SIMPLE,
          source="np.gradient (central inside, one-sided at the ends)")
# Several axes at once (a list of arrays), scalar spacings or coordinates.
GC7 = f32([0.0, 0.5, 1.5, 1.75, 3.0, 4.5, 5.0])
GC5 = f32([-1.0, 0.0, 0.25, 2.0, 2.5])
for name, f, spacing, axes in (("all_axes", X, [], []), ("all_axes_dx", X, [0.5], []),
                               ("per_axis_dx", X, [2.0, 0.25], [0, 1]), ("coordinates", X, [GC7, GC5], [0, 1]),
                               ("coordinates_axis1", X, [GC5], [1]), ("mixed", X, [GC7, 3.0], [0, -1]),
                               ("vector_coordinates", V13[:5].copy(), [GC5], [])):
    coords = [np.asarray(h) for h in spacing if np.ndim(h) == 1]
    want = np.gradient(f, *spacing, axis=tuple(axes) if axes else None)
    want = [want] if isinstance(want, np.ndarray) else want
    kind = ["coords" if np.ndim(h) == 1 else float(h) for h in spacing]
    multi3(f"gradient_axes/{name}", "gradient_axes", [f] + coords, want, {"spacing": kind, "axes": axes}, SIMPLE,
           source="np.gradient over several axes (coordinates: second order on the uneven grid)")
# Jumps far from odd multiples of pi (the threshold and the boundary of the correction).
UW13 = f32([0.1, 0.9, 2.5, -2.9, -1.2, 0.4, 2.8, -2.6, -0.1, 5.9, 0.3, -5.5, 1.0])
UW75 = f32(np.cumsum(X * 1.1, axis=0) % (2 * np.pi) - np.pi)
UWD = f32([10, 100, 200, 300, 20, 60, 350, 5, 180.5, 300, 90, -100, 40])
for name, p, discont, axis, period in (("vector", UW13, None, -1, 2 * np.pi), ("vector_discont4", UW13, 4.0, -1, 2 * np.pi),
                                       ("matrix_axis0", UW75, None, 0, 2 * np.pi), ("degrees", UWD, None, -1, 360.0),
                                       ("degrees_discont250", UWD, 250.0, -1, 360.0)):
    d = np.diff(np.asarray(p, np.float64), axis=axis)
    lim = discont if discont is not None else period / 2
    assert np.all(np.abs(np.abs(d) - lim) > 1e-3) and np.all(np.abs(np.abs(d) % period - period / 2) > 1e-3), name
    case3(f"unwrap/{name}", "unwrap", [p], np.unwrap(p, discont=discont, axis=axis, period=period),
          {"discont": discont, "axis": axis, "period": period}, SIMPLE, source="np.unwrap")
IXP = f32([-3, -1.5, 0, 0.5, 2, 3.5, 6])
IFP = f32([1, -0.5, 2, 0.25, -1, 3, 3.5])
IX13 = f32([-4, -3, -2.25, -1.5, 0.1, 0.5, 1.25, 3.5, 5.9, 6, 7, NAN, -INF])
IX75 = f32(X * 1.6)
for name, x, left, right in (("vector", IX13, None, None), ("vector_left_right", IX13, -7.0, 9.5),
                             ("matrix", IX75, None, None), ("matrix_left", IX75, 0.0, None),
                             ("infinity", f32([INF, -INF, 6, -3, 1e30, -1e30, 0, 2, 3.5, 0.25, 4, 5, -2]), -1.0, 1.0)):
    case3(f"interp/{name}", "interp", [x, IXP, IFP], np.interp(x, IXP, IFP, left, right), {"left": left, "right": right},
          SIMPLE, source="np.interp (left/right outside [xp[0], xp[-1]])")

# ------------------------------------------------------------------ block, splits, stacking, transposes, predicates
B22 = f32([[100, 101], [102, 103]])
for name, rows in (("2x2", [[X, X72], [X25, B22]]), ("vectors", [[V13], [f32(V13 * 2)]]), ("one_row", [[X, f32(-X)]]),
                   ("three_rows", [[X25], [X], [X25]])):
    ins = [a for r in rows for a in r]
    case3(f"block/{name}", "block", ins, np.block(rows), {"rows": [len(r) for r in rows]}, EXACT, source="np.block")
for name, x, sections, axis in (("vector_4", V13, 4, 0), ("matrix_3_axis0", X, 3, 0), ("matrix_2_axis1", X, 2, 1),
                                ("matrix_5_axis-1", X, 5, -1), ("int32_4_axis0", RI75, 4, 0), ("3d_2_axis2", X3, 2, 2)):
    multi3(f"array_split/{name}", "array_split", [x], np.array_split(x, sections, axis),
           {"sections": sections, "axis": axis}, EXACT, dtype_of(x), "np.array_split (the first parts one longer)")
V12 = f32(np.arange(12) * 0.5 - 2)
multi3("hsplit/matrix_3", "hsplit", [G76], np.hsplit(G76, 3), {"sections": 3}, EXACT, source="np.hsplit")
multi3("hsplit/vector_4", "hsplit", [V12], np.hsplit(V12, 4), {"sections": 4}, EXACT, source="np.hsplit (1-D: axis 0)")
multi3("vsplit/matrix_5", "vsplit", [G103], np.vsplit(G103, 5), {"sections": 5}, EXACT, source="np.vsplit")
multi3("vsplit/matrix_7", "vsplit", [X], np.vsplit(X, 7), {"sections": 7}, EXACT, source="np.vsplit")
multi3("dsplit/3d_2", "dsplit", [X3], np.dsplit(X3, 2), {"sections": 2}, EXACT, source="np.dsplit")
multi3("dsplit/3d_4", "dsplit", [X3], np.dsplit(X3, 4), {"sections": 4}, EXACT, source="np.dsplit")
for name, x, axis in (("matrix_axis0", X, 0), ("matrix_axis1", X, 1), ("3d_axis-1", X3, -1), ("int32_axis1", RI75, 1)):
    multi3(f"unstack/{name}", "unstack", [x], list(np.moveaxis(x, axis, 0)), {"axis": axis}, EXACT, dtype_of(x),
           "np.unstack (NumPy 2): the slices along axis")
case3("matrix_transpose/matrix", "matrix_transpose", [X], np.swapaxes(X, -1, -2), {}, EXACT, source="np.matrix_transpose")
case3("matrix_transpose/3d", "matrix_transpose", [X3], np.swapaxes(X3, -1, -2), {}, EXACT, source="np.matrix_transpose")
for name, x, axes in (("3d_201", X3, [2, 0, 1]), ("3d_120", X3, [1, 2, 0]), ("matrix_10", X, [1, 0]),
                      ("3d_identity", X3, [0, 1, 2])):
    case3(f"permute_dims/{name}", "permute_dims", [x], np.transpose(x, axes), {"axes": axes}, EXACT,
          source="np.permute_dims (np.transpose)")
for name, xs, axis in (("axis0", [X, X25], 0), ("axis1", [X, X72], 1), ("axis-1", [X, X72, X], -1),
                       ("vectors", [V13, V3], 0), ("int32", [RI75, i32(np.ones((2, 5)))], 0)):
    case3(f"concat/{name}", "concat", xs, np.concatenate(xs, axis), {"axis": axis}, EXACT, dtype_of(xs[0]),
          "np.concat (np.concatenate)")
COL7 = f32(np.arange(7).reshape(7, 1) - 3.0)
multi3("broadcast_arrays/col_row_scalar", "broadcast_arrays", [COL7, V5, SC], np.broadcast_arrays(COL7, V5, SC), {},
       EXACT, source="np.broadcast_arrays")
multi3("broadcast_arrays/3d", "broadcast_arrays", [X3, f32(V34[0]), f32(X3[:, :1, :])],
       np.broadcast_arrays(X3, V34[0], X3[:, :1, :]), {}, EXACT, source="np.broadcast_arrays")
X_ONE = X.copy()
X_ONE[6, 4] += 0.5
for name, a, b, en in (("equal", X, f32(X.copy()), False), ("one_differs", X, X_ONE, False), ("nan", XN, XN, False),
                       ("nan_equal_nan", XN, XN, True), ("nan_vs_number_equal_nan", XN, X, True),
                       ("shapes_differ", X, X25, False), ("int32", RI75, i32(RI75.copy()), False),
                       ("signed_zero", f32([0.0, 1, 2]), f32([-0.0, 1, 2]), False)):
    case3(f"array_equal/{name}", "array_equal", [a, b], np.array_equal(a, b, equal_nan=en), {"equal_nan": en}, EXACT,
          "bool", "np.array_equal (a bool scalar)")
ROWS_SAME = f32(np.tile(V5, (7, 1)))
for name, a, b in (("equal", X, f32(X.copy())), ("broadcast_row", ROWS_SAME, V5), ("broadcast_row_differs", X, V5),
                   ("not_broadcastable", X, X72), ("broadcast_col", f32(np.tile(COL7, (1, 5))), COL7),
                   ("nan", XN, XN)):
    case3(f"array_equiv/{name}", "array_equiv", [a, b], np.array_equiv(a, b), {}, EXACT, "bool",
          "np.array_equiv (equal after broadcasting; False when not broadcastable)")

# ------------------------------------------------------------------ set functions (no NaNs: see above)
SA13 = f32([3, -1.5, 3, 0, 2.25, 7, -1.5, 0.5, 7, 4, -4, 2.25, 1])
SB75 = f32([[1, 2, 5, 5.5, 6], [0.5, 0.5, 6, -3, 8], [9, 9, 9, 10, 11], [2.25, 12, 13, 14, 15], [1, 1, 1, 1, 1],
            [16, 17, 18, 19, 20], [-1.5, 21, 22, 23, 24]])
SIA = i32([5, -2, 5, 0, 3, 9, -2, 7, 1, 3, 8, 0, 4])
SIB = i32(np.arange(35).reshape(7, 5) % 8 - 3)
SDIS = f32([10, 20, 30, 40, 50, 60, 70])  # disjoint from SA13


def set_ref(op, a, b):
    return getattr(np, op)(np.ravel(a), np.ravel(b))


def pad_set(op, vals, size, fill):
    """JAX's padding of the set functions with size: fill_value, else union1d the smallest
    value, intersect1d / setxor1d the smallest result (0 when none), setdiff1d 0."""
    n = len(vals)
    if fill is None:
        fill = 0.0 if op == "setdiff1d" or n == 0 else vals.min()
    return np.concatenate([vals[:size], np.full(max(0, size - n), fill, np.float64)])


for op in ("union1d", "intersect1d", "setdiff1d", "setxor1d"):
    for name, a, b in (("vector_matrix", SA13, SB75), ("matrix_vector", SB75, SA13), ("int32", SIA, SIB)):
        vals = set_ref(op, a, b).astype(np.float64)
        n = len(vals)
        assert n >= 4, (op, name, n)
        for sname, size, fv in (("pad", n + 3, None), ("pad_fill", n + 2, -9.0), ("equal", n, None), ("short", n - 2, None)):
            case3(f"{op}/{name}_size_{sname}", op, [a, b], pad_set(op, vals, size, fv), {"size": size, "fill_value": fv},
                  EXACT, dtype_of(a), f"np.{op}, then JAX's size: padded (fill_value or JAX's default) or cut")
# Without size: eager only.
for op in ("union1d", "intersect1d", "setdiff1d", "setxor1d"):
    for name, a, b in (("vector_matrix", SA13, SB75), ("int32", SIA, SIB)):
        case3(f"{op}/{name}_eager", op, [a, b], set_ref(op, a, b), {"size": None, "fill_value": None}, EXACT,
              dtype_of(a), f"np.{op} (sorted, unique)", group="eager")
case3("intersect1d/disjoint_eager", "intersect1d", [SA13, SDIS], set_ref("intersect1d", SA13, SDIS),
      {"size": None, "fill_value": None}, EXACT, "float32", "np.intersect1d: empty", group="eager")
case3("setdiff1d/disjoint_eager", "setdiff1d", [SA13, SDIS], set_ref("setdiff1d", SA13, SDIS),
      {"size": None, "fill_value": None}, EXACT, "float32", "np.setdiff1d: the unique values of a", group="eager")

# ------------------------------------------------------------------ eager only: extract, compress, trim_zeros
for name, cond, arr in (("matrix", EXC, X), ("vector", EXC13, V13), ("none", b8(np.zeros(13)), V13)):
    case3(f"extract/{name}_eager", "extract", [cond, arr], np.extract(cond, arr), {"size": None, "fill_value": 0}, EXACT,
          source="np.extract", group="eager")
for name, cond, arr, axis in (("axis0", b8([1, 0, 1, 1, 0, 0, 1]), X, 0), ("axis1_short", b8([0, 1, 1]), X, 1),
                              ("flat", b8(np.arange(13) % 3 == 0), X, None), ("axis-1", b8([1, 0, 0, 1, 1]), X, -1),
                              ("vector_all", b8(np.ones(13)), V13, 0)):
    case3(f"compress/{name}", "compress", [cond, arr], np.compress(cond, arr, axis),
          {"axis": axis, "size": None, "fill_value": 0}, EXACT,
          source="np.compress (a condition shorter than the axis selects from its first part)", group="eager")
TZ = f32([0, 0, -0.0, 1.5, 0, -2, 0, 3, 0, 0, 0, 4, 0])
for name, x, trim in (("fb", TZ, "fb"), ("f", TZ, "f"), ("b", TZ, "b"), ("no_zeros", V13[V13 != 0].copy(), "fb"),
                      ("all_zero", f32(np.zeros(13)), "fb"), ("nan_kept", f32([0, NAN, 0, 1, 0]), "fb"),
                      ("int32", i32([0, 0, 3, 0, -1, 0]), "fb")):
    x = x if x.dtype == np.int32 else f32(x)
    case3(f"trim_zeros/{name}", "trim_zeros", [x], np.trim_zeros(x, trim), {"trim": trim}, EXACT, dtype_of(x),
          "np.trim_zeros (-0.0 is zero, NaN is not)", group="eager")

# ------------------------------------------------------------------ gradients (float64)
grad_cases3 = []


def grad_case3(name, op, fn, xs, kw, wrt, analytic=None):
    """Central differences of sum(fn(*xs)) w.r.t. the inputs in wrt (the others fixed)."""
    xs = [np.asarray(x, np.float64) for x in xs]
    grads = []
    for i in wrt:
        g = np.zeros_like(xs[i])
        flat = g.reshape(-1)
        for j in range(xs[i].size):
            def at(d):
                ys = [y.copy() for y in xs]
                ys[i].reshape(-1)[j] += d
                return float(np.sum(fn(*ys)))
            flat[j] = (at(H) - at(-H)) / (2 * H)
        grads.append(g)
    if analytic is not None:
        for gi, ai in zip(grads, analytic(*xs)):
            assert np.allclose(gi, ai, rtol=1e-7, atol=1e-7), (name, gi, ai)
    assert name not in names3 and all(c["name"] != name for c in grad_cases3), name
    grad_cases3.append({
        "name": name,
        "op": op,
        "group": group3_of(op),
        "inputs": [enc_array(x, "float64") for x in xs],
        "kwargs": kw,
        "wrt": list(wrt),
        "h": H,
        "expected_value": enc_array(fn(*xs), "float64"),
        "expected_grad": [enc_array(gi, "float64") for gi in grads],
        "tol": 1e-5,
    })


GP = np.array([0.5, -1.2, 2.0, 0.3])
grad_case3("grad polyval/x", "polyval", np.polyval, [GP, G13], {}, [1],
           analytic=lambda p, x: [np.polyval(np.polyder(p), x)])
grad_case3("grad polyval/p_and_x", "polyval", np.polyval, [GP, G13], {}, [0, 1],
           analytic=lambda p, x: [np.array([np.sum(x ** (len(p) - 1 - k)) for k in range(len(p))]),
                                  np.polyval(np.polyder(p), x)])
GXP = np.array([-3.0, -1.5, 0.0, 0.7, 2.0, 3.5])
GFP = np.array([1.0, -0.5, 2.0, 0.25, -1.0, 3.0])
GIX = np.array([-3.7, -2.2, -1.1, -0.4, 0.3, 0.55, 1.2, 1.9, 2.6, 3.1, 4.2, -2.9, 1.45])  # away from the knots
assert np.min(np.abs(GIX[:, None] - GXP[None, :])) > 0.04
grad_case3("grad interp/x", "interp", lambda x, xp, fp: np.interp(x, xp, fp), [GIX, GXP, GFP],
           {"left": None, "right": None}, [0])
grad_case3("grad interp/x_xp_fp", "interp", lambda x, xp, fp: np.interp(x, xp, fp), [GIX, GXP, GFP],
           {"left": None, "right": None}, [0, 1, 2])
grad_case3("grad trapezoid/dx_axis0", "trapezoid", lambda y: np.trapz(y, dx=0.5, axis=0), [A75], {"dx": 0.5, "axis": 0}, [0])
GTX5 = np.array([0.0, 0.3, 1.1, 1.5, 2.6])
grad_case3("grad trapezoid/x_axis-1", "trapezoid", lambda y, x: np.trapz(y, x, axis=-1), [A75, GTX5], {"axis": -1}, [0, 1])
grad_case3("grad cov/rows", "cov", lambda m: np.cov(m), [A75], {"rowvar": True, "bias": False, "ddof": None}, [0])
grad_case3("grad cov/columns_ddof0", "cov", lambda m: np.cov(m, rowvar=False, ddof=0), [A75],
           {"rowvar": False, "bias": False, "ddof": 0}, [0])
grad_case3("grad i0", "i0", np.i0, [BES], {}, [0], analytic=lambda x: [sp.i1(x)])
assert np.min(np.abs(A75 - B75)) > 1e-3
grad_case3("grad fmax", "fmax", np.fmax, [A75, B75], {}, [0, 1],
           analytic=lambda a, b: [(a > b).astype(np.float64), (b > a).astype(np.float64)])

out3 = {
    "comment": ("Written by tools/numpy_reference.py (NumPy " + np.__version__ + ", SciPy " + __import__("scipy").__version__ +
                "); do not edit. Non-finite numbers are the strings \"nan\", \"inf\", \"-inf\"."),
    "cases": cases3,
    "grad_cases": grad_cases3,
}
path3 = sys.argv[3] if len(sys.argv) > 3 else os.path.join(os.path.dirname(path), "surface3.json")
with open(path3, "w") as f:
    json.dump(out3, f, indent=None, allow_nan=False, separators=(",", ":"))
    f.write("\n")
print(f"{path3}: {len(cases3)} cases, {len(grad_cases3)} gradient cases")
