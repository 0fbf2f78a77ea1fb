"""Writes tests/data/numpy_repr.json: random arrays and the text JAX's
Array.__repr__ would print for them (numpy's array2string inside JAX's
wrapper), to test tessel's printing beyond the cases measured in JAX.

  /usr/bin/python3 tools/numpy_reprs.py tests/data/numpy_repr.json
"""
import json
import sys

import numpy as np


def jax_repr(a, weak=False):
    prefix = "Array("
    dtype_str = f"dtype={a.dtype.name}, weak_type=True)" if weak else f"dtype={a.dtype.name})"
    line_width = 75
    if a.size == 0:
        s = f"[], shape={a.shape}"
    else:
        s = np.array2string(a, prefix=prefix, suffix=",", separator=", ", max_line_width=line_width)
    last_line_len = len(s) - s.rfind("\n") + 1
    sep = " "
    if last_line_len + len(dtype_str) + 1 > line_width:
        sep = " " * len(prefix)
    return f"{prefix}{s},{sep}{dtype_str}"


rng = np.random.default_rng(2026)
cases = []
for i in range(300):
    dtype = rng.choice(["float32", "float64", "int32", "int64", "uint32", "bool"])
    rank = int(rng.integers(0, 4))
    shape = tuple(int(rng.integers(1, 7)) for _ in range(rank))
    if i % 40 == 0:  # a few past numpy's summarisation threshold
        shape = (int(rng.integers(1001, 1100)),)
    n = int(np.prod(shape)) if shape else 1
    if dtype.startswith("float"):
        scale = 10.0 ** rng.integers(-9, 10)
        v = rng.standard_normal(n) * scale
        if rng.random() < 0.3:
            v = np.round(v, int(rng.integers(0, 4)))
        if rng.random() < 0.1:
            v[rng.integers(0, n)] = rng.choice([np.nan, np.inf, -np.inf])
        a = v.astype(dtype).reshape(shape)
        values = [float(x) if np.isfinite(x) else str(x) for x in a.ravel().astype(np.float64)]
    elif dtype == "bool":
        a = (rng.random(n) < 0.5).reshape(shape)
        values = [bool(x) for x in a.ravel()]
    else:
        lo, hi = (0, 2**32) if dtype == "uint32" else (-(10 ** int(rng.integers(1, 10))), 10 ** int(rng.integers(1, 10)))
        a = rng.integers(lo, hi, n).astype(dtype).reshape(shape)
        values = [int(x) for x in a.ravel()]
    cases.append({"dtype": dtype, "shape": list(shape), "values": values, "repr": jax_repr(a)})
with open(sys.argv[1], "w") as f:
    json.dump(cases, f)
print(len(cases), "cases")
