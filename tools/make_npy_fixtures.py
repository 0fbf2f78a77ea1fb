#!/usr/bin/python3
"""Writes the NumPy reference files that tests/dsl/io_npy_test.cpp loads.

Every file in tests/data/npy/ is written by NumPy itself (np.save,
np.lib.format.write_array, np.savez, np.savez_compressed), except two whose
headers NumPy does not write but other writers do, edited by hand below:
'<V2' (ml_dtypes' bfloat16 as np.save writes it; plain NumPy writes '|V2')
and a dict in double quotes with odd spacing and no trailing comma.

tests/data/npy/expected.json gives, per file, what tessel must load: the
dtype (tessel's name), the shape, and the elements' bytes in C order,
little endian, as hex; "options_dtype" is the LoadOptions dtype to pass.
For an .npz, "members" maps each entry's name to the same.

Usage: /usr/bin/python3 tools/make_npy_fixtures.py   (NumPy 1.24 or later)
"""
import io
import json
import os

import numpy as np

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "npy")

# Six values per dtype, shape (2, 3): the extremes and the awkward floats.
def values(name):
    if name == "bool":
        return np.array([True, False, True, True, False, False])
    t = np.dtype(name)
    if t.kind in "iu":
        info = np.iinfo(t)
        return np.array([info.min, info.max, 0, 1, info.max // 3, 42], dtype=t)
    if t.kind == "f":
        info = np.finfo(t)
        return np.array([np.nan, np.inf, -np.inf, -0.0, 1.5, info.max], dtype=t)
    real = np.finfo(t).dtype
    re = np.array([np.nan, 1.5, -0.0, np.inf, 2.0, np.finfo(real).max], dtype=real)
    im = np.array([0.25, -np.inf, 3.0, -0.0, np.nan, np.finfo(real).tiny], dtype=real)
    out = np.empty(6, dtype=t)
    out.real, out.imag = re, im
    return out

NATIVE = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float16", "float32", "float64", "complex64", "complex128"]

expected = {}

def expect(a, dtype=None):
    a = np.array(a, order="C")  # ascontiguousarray would make a 0-d array 1-d
    le = a.astype(a.dtype.newbyteorder("<")) if a.dtype.kind not in "bV" and a.dtype.itemsize > 1 else a
    return {"dtype": dtype or a.dtype.name, "shape": list(a.shape), "hex": le.tobytes().hex()}

def save(name, a, **kw):
    np.save(os.path.join(OUT, name), a, **kw)

def main():
    os.makedirs(OUT, exist_ok=True)
    for f in os.listdir(OUT):
        os.remove(os.path.join(OUT, f))
    for name in NATIVE:
        a = values(name).reshape(2, 3)
        save(f"{name}_c.npy", a)
        expected[f"{name}_c.npy"] = expect(a)
        save(f"{name}_f.npy", np.asfortranarray(a))
        expected[f"{name}_f.npy"] = expect(a)
        if a.dtype.itemsize > 1:
            save(f"{name}_be.npy", a.astype(a.dtype.newbyteorder(">")))
            expected[f"{name}_be.npy"] = expect(a)
    # Fortran order in three dimensions, big endian too.
    a3 = np.arange(24, dtype=np.float64).reshape(2, 3, 4) * 1.25 - 7
    save("float64_3d_f_be.npy", np.asfortranarray(a3.astype(">f8")))
    expected["float64_3d_f_be.npy"] = expect(a3)
    a3i = np.arange(24, dtype=np.int16).reshape(4, 3, 2) * 1000 - 9000
    save("int16_3d_f.npy", np.asfortranarray(a3i))
    expected["int16_3d_f.npy"] = expect(a3i)
    # A scalar, an empty array, a 1-D array.
    s = np.array(3.25)
    save("scalar_float64.npy", s)
    expected["scalar_float64.npy"] = expect(s)
    si = np.array(-7, dtype=np.int32)
    save("scalar_int32.npy", si)
    expected["scalar_int32.npy"] = expect(si)
    e = np.zeros((0, 3), dtype=np.float32)
    save("empty_0x3.npy", e)
    expected["empty_0x3.npy"] = expect(e)
    # Format versions 2.0 and 3.0.
    v = np.arange(5, dtype=np.int64) * -3
    for ver in [(2, 0), (3, 0)]:
        fname = f"version_{ver[0]}_0.npy"
        with open(os.path.join(OUT, fname), "wb") as f:
            np.lib.format.write_array(f, v, version=ver)
        expected[fname] = expect(v)
    # bfloat16 as np.save writes ml_dtypes' ('<V2'), and as plain NumPy
    # writes raw 2-byte records ('|V2'): bits of 1.0, -2.5, NaN, -inf, 0, max.
    bf = np.array([0x3F80, 0xC020, 0x7FC0, 0xFF80, 0x0000, 0x7F7F], dtype="<u2").reshape(3, 2)
    buf = io.BytesIO()
    np.save(buf, bf.view("V2"))
    raw = buf.getvalue()
    assert b"'|V2'" in raw
    with open(os.path.join(OUT, "bfloat16_v2.npy"), "wb") as f:
        f.write(raw.replace(b"'|V2'", b"'<V2'", 1))
    expected["bfloat16_v2.npy"] = expect(bf, "bfloat16")
    save("raw_v2.npy", bf.view("V2"))
    expected["raw_v2.npy"] = expect(bf, "bfloat16")
    # float8_e4m3fn as np.save writes ml_dtypes' ('|V1'): 1.0, -2.0, 448, NaN, 0, min subnormal.
    f8 = np.array([0x38, 0xC0, 0x7E, 0x7F, 0x00, 0x01], dtype=np.uint8)
    save("float8_v1.npy", f8.view("V1"))
    expected["float8_v1.npy"] = dict(expect(f8, "float8_e4m3fn"), options_dtype="float8_e4m3fn")
    # A header NumPy does not write but accepts: double quotes, other
    # spacing and key order, no trailing comma, Python 2's long suffix.
    hw = np.array([1, -2, 3], dtype="<i4")
    d = b'{"shape":(3L,) ,"fortran_order" : False,"descr":"<i4"}'
    d += b" " * (64 - (10 + len(d) + 1) % 64) + b"\n"
    with open(os.path.join(OUT, "handwritten.npy"), "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + len(d).to_bytes(2, "little") + d + hw.tobytes())
    expected["handwritten.npy"] = expect(hw)
    # .npz, stored and deflated.
    members = {"a": values("int32").reshape(2, 3), "b": np.linspace(-1, 1, 4), "c": np.array(True),
               "d": np.zeros((0, 2), dtype=np.uint8)}
    np.savez(os.path.join(OUT, "stored.npz"), **members)
    np.savez_compressed(os.path.join(OUT, "compressed.npz"), **members)
    for fname in ["stored.npz", "compressed.npz"]:
        expected[fname] = {"members": {k: expect(v) for k, v in members.items()}}
    with open(os.path.join(OUT, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1, sort_keys=True)
        f.write("\n")
    total = sum(os.path.getsize(os.path.join(OUT, f)) for f in os.listdir(OUT))
    print(f"{len(os.listdir(OUT))} files, {total} bytes in {os.path.normpath(OUT)}")

if __name__ == "__main__":
    main()
