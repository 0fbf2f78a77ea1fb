"""Measures facts from JAX itself (run where JAX is installed, CPU, 8 devices).

Writes JSON files of reference values that tessel's tests compare against:
visualize_array_sharding drawings, Array reprs, PRNG values, output shardings
and collectives of jitted programs, uneven shard indices and MLP losses.

  JAX_PLATFORMS=cpu XLA_FLAGS=--xla_force_host_platform_device_count=8 \
    python3 tools/jax_facts.py OUTDIR
"""
import contextlib
import io
import json
import os
import sys
import traceback

import numpy as np
import jax
import jax.numpy as jnp
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P, AxisType

_make_mesh = jax.make_mesh


def make_mesh(shape, names):
    """The tutorials' meshes: auto (not explicit) axes."""
    return _make_mesh(shape, names, axis_types=(AxisType.Auto,) * len(shape))


jax.make_mesh = make_mesh

out_dir = sys.argv[1]
os.makedirs(out_dir, exist_ok=True)
assert len(jax.devices()) == 8, jax.devices()


def save(name, obj):
    with open(os.path.join(out_dir, name), "w") as f:
        json.dump(obj, f, indent=1, sort_keys=True)


def section(fn):
    try:
        fn()
        print("ok", fn.__name__, flush=True)
    except Exception:
        print("FAILED", fn.__name__, flush=True)
        traceback.print_exc()


def spec_str(s):
    if isinstance(s, NamedSharding):
        parts = []
        for e in s.spec:
            if e is None:
                parts.append("None")
            elif isinstance(e, tuple):
                parts.append("(" + ", ".join(repr(a) for a in e) + (",)" if len(e) == 1 else ")"))
            else:
                parts.append(repr(e))
        return "P(" + ", ".join(parts) + ")"
    return repr(s)


def draw(x):
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        jax.debug.visualize_array_sharding(x, use_color=False)
    return buf.getvalue()


COLLECTIVES = ["all-gather", "all-reduce", "reduce-scatter", "all-to-all", "collective-permute"]


def collectives(compiled_text):
    return [c for c in COLLECTIVES if c in compiled_text]


def visualize():
    mesh = jax.make_mesh((4, 2), ("a", "b"))
    specs = {"P('a', 'b')": P("a", "b"), "P('b', 'a')": P("b", "a"), "P('a', None)": P("a", None),
             "P(None, 'b')": P(None, "b"), "P(None, 'a')": P(None, "a"), "P(('a', 'b'), None)": P(("a", "b"), None),
             "P(None, ('a', 'b'))": P(None, ("a", "b")), "P()": P(), "P('b')": P("b"),
             "P(('b', 'a'), None)": P(("b", "a"), None)}
    facts = []
    for shape in [(16, 16), (8192, 8192), (4, 8), (8, 160), (160, 8), (64, 8)]:
        for name, spec in specs.items():
            try:
                x = jax.device_put(jnp.zeros(shape, jnp.float32), NamedSharding(mesh, spec))
            except Exception:
                continue
            facts.append({"mesh": [[4, 2], ["a", "b"]], "shape": list(shape), "spec": name, "text": draw(x)})
    mesh8 = jax.make_mesh((8,), ("x",))
    for shape, spec, name in [((24,), P("x"), "P('x')"), ((32,), P("x"), "P('x')"), ((24,), P(), "P()"),
                              ((8192,), P("x"), "P('x')"), ((16, 16), P("x"), "P('x')"),
                              ((16, 16), P(None, "x"), "P(None, 'x')")]:
        x = jax.device_put(jnp.zeros(shape, jnp.float32), NamedSharding(mesh8, spec))
        facts.append({"mesh": [[8], ["x"]], "shape": list(shape), "spec": name, "text": draw(x)})
    mesh24 = jax.make_mesh((2, 4), ("x", "y"))
    for shape, spec, name in [((4, 8), P("x", "y"), "P('x', 'y')"), ((8192, 8192), P("x", "y"), "P('x', 'y')"),
                              ((8192, 8192), P("y", "x"), "P('y', 'x')")]:
        x = jax.device_put(jnp.zeros(shape, jnp.float32), NamedSharding(mesh24, spec))
        facts.append({"mesh": [[2, 4], ["x", "y"]], "shape": list(shape), "spec": name, "text": draw(x)})
    # A subset mesh and a single device.
    sub = Mesh(np.array(jax.devices()[4:]).reshape(2, 2), ("p", "q"))
    x = jax.device_put(jnp.zeros((8, 8), jnp.float32), NamedSharding(sub, P("p", "q")))
    facts.append({"mesh": [[2, 2], ["p", "q"], [4, 5, 6, 7]], "shape": [8, 8], "spec": "P('p', 'q')", "text": draw(x)})
    for shape in [(8192, 8192), (16,), (4, 8)]:
        x = jnp.zeros(shape, jnp.float32)
        facts.append({"mesh": "single", "shape": list(shape), "spec": "single", "text": draw(x)})
    save("visualize.json", facts)


def reprs():
    cases = {}
    cases["arange32"] = repr(jnp.arange(32))
    cases["arange32f_4x8"] = repr(jnp.arange(32.0).reshape(4, 8))
    cases["sin_arange8"] = repr(jnp.sin(jnp.arange(8.0)))
    cases["mixed_exp"] = repr(jnp.array([1e-5, 1.0, 3.5], jnp.float32))
    cases["big_exp"] = repr(jnp.array([1e9, -2.5, 0.0], jnp.float32))
    cases["neg"] = repr(jnp.array([[-1.5, 2.25], [3.0, -0.125]], jnp.float32))
    cases["nan_inf"] = repr(jnp.array([np.nan, np.inf, -np.inf, 1.5], jnp.float32))
    cases["bool"] = repr(jnp.array([True, False, True]))
    cases["bool_scalar"] = repr(jnp.array(True))
    cases["scalar_weak"] = repr(jnp.array(1.0))
    cases["scalar_f32"] = repr(jnp.float32(2.5) * jnp.ones((), jnp.float32))
    cases["int_weak"] = repr(jnp.array(3))
    cases["uint32"] = repr(jnp.array([1, 4000000000], jnp.uint32))
    cases["summ_1d"] = repr(jnp.arange(2000.0))
    cases["summ_2d"] = repr(jnp.arange(40000, dtype=jnp.float32).reshape(200, 200) / 7)
    cases["summ_3d"] = repr(jnp.arange(3000).reshape(10, 15, 20))
    cases["empty"] = repr(jnp.zeros((0, 3)))
    cases["rank3"] = repr(jnp.arange(24).reshape(2, 3, 4))
    cases["thirds"] = repr(jnp.arange(10.0) / 3)
    cases["wide_ints"] = repr(jnp.arange(100) * 1000)
    cases["normal44"] = repr(jax.random.normal(jax.random.key(0), (4, 4)))
    cases["linspace"] = repr(jnp.linspace(0, 1, 7))
    cases["eye3"] = repr(jnp.eye(3))
    cases["tiny"] = repr(jnp.array([1e-8, 2e-8], jnp.float32))
    cases["neg_zero"] = repr(jnp.array([-0.0, 1.0], jnp.float32))
    save("repr.json", cases)


def prng():
    facts = {}
    for mode in [False, True]:
        jax.config.update("jax_threefry_partitionable", mode)
        m = "on" if mode else "off"
        k = jax.random.key(0)
        f = {}
        f["key_data_key0"] = np.asarray(jax.random.key_data(k)).tolist()
        f["key_data_key42"] = np.asarray(jax.random.key_data(jax.random.key(42))).tolist()
        f["split2"] = np.asarray(jax.random.key_data(jax.random.split(k))).tolist()
        f["split5"] = np.asarray(jax.random.key_data(jax.random.split(k, 5))).tolist()
        f["fold_in_7"] = np.asarray(jax.random.key_data(jax.random.fold_in(k, 7))).tolist()
        for shape in [(1,), (2,), (3,), (7,), (4, 4), (3, 5), (1025,), (2, 3, 4)]:
            s = "x".join(map(str, shape))
            f["bits_" + s] = np.asarray(jax.random.bits(k, shape)).ravel().tolist()
            f["uniform_" + s] = np.asarray(jax.random.uniform(k, shape)).ravel().astype(float).tolist()
            f["normal_" + s] = np.asarray(jax.random.normal(k, shape)).ravel().astype(float).tolist()
        k42 = jax.random.key(42)
        f["uniform_minmax_10"] = np.asarray(jax.random.uniform(k42, (10,), minval=-2.0, maxval=3.0)).astype(float).tolist()
        f["randint_0_10_20"] = np.asarray(jax.random.randint(k42, (20,), 0, 10)).tolist()
        f["randint_m5_1000_9"] = np.asarray(jax.random.randint(k42, (9,), -5, 1000)).tolist()
        f["bernoulli_p3_16"] = np.asarray(jax.random.bernoulli(k42, 0.3, (16,))).tolist()
        f["permutation_10"] = np.asarray(jax.random.permutation(k42, 10)).tolist()
        f["permutation_arr"] = np.asarray(jax.random.permutation(k42, jnp.arange(6.0))).astype(float).tolist()
        f["truncated_normal_8"] = np.asarray(jax.random.truncated_normal(k42, -1.0, 2.0, (8,))).astype(float).tolist()
        f["seed_f_key42_arange24"] = np.asarray(jnp.arange(24) + jax.random.uniform(k42, (24,))).astype(float).tolist()
        keys = jax.random.split(k, 4)
        f["split4_then_normal"] = [np.asarray(jax.random.normal(kk, (3,))).astype(float).tolist() for kk in keys]
        facts[m] = f
    jax.config.update("jax_threefry_partitionable", True)
    save("prng.json", facts)
    # float64 draws
    jax.config.update("jax_enable_x64", True)
    f64 = {}
    for mode in [False, True]:
        jax.config.update("jax_threefry_partitionable", mode)
        m = "on" if mode else "off"
        k = jax.random.key(0)
        f64[m] = {
            "uniform_f64_7": np.asarray(jax.random.uniform(k, (7,), dtype=jnp.float64)).tolist(),
            "normal_f64_7": np.asarray(jax.random.normal(k, (7,), dtype=jnp.float64)).tolist(),
            "bits64_5": [int(v) for v in np.asarray(jax.random.bits(k, (5,), dtype=jnp.uint64))],
            "randint64_5": np.asarray(jax.random.randint(k, (5,), 0, 1 << 40, dtype=jnp.int64)).tolist(),
        }
    jax.config.update("jax_enable_x64", False)
    jax.config.update("jax_threefry_partitionable", True)
    save("prng_f64.json", f64)


def propagation():
    mesh = jax.make_mesh((4, 2), ("a", "b"))
    S = lambda spec: NamedSharding(mesh, spec)
    facts = []

    def case(name, fn, shapes, specs, mesh_=mesh):
        args = [jax.device_put(jnp.arange(np.prod(sh), dtype=jnp.float32).reshape(sh) / 100.0,
                               NamedSharding(mesh_, sp)) for sh, sp in zip(shapes, specs)]
        jf = jax.jit(fn)
        out = jf(*args)
        text = jf.lower(*args).compile().as_text()
        outs = out if isinstance(out, (tuple, list)) else [out]
        facts.append({"name": name, "shapes": [list(s) for s in shapes],
                      "in_specs": [spec_str(a.sharding) for a in args],
                      "out_specs": [spec_str(o.sharding) for o in outs],
                      "out_shapes": [list(o.shape) for o in outs],
                      "collectives": collectives(text)})

    sq = (16, 16)
    case("sin", jnp.sin, [sq], [P("a", "b")])
    case("2sin+1", lambda x: 2 * jnp.sin(x) + 1, [sq], [P("a", "b")])
    case("copy", jnp.copy, [sq], [P("a", "b")])
    case("dot_row_col", jnp.dot, [sq, sq], [P("a", None), P(None, "b")])
    case("dot_block_row", jnp.dot, [sq, sq], [P("a", "b"), P("b", None)])
    case("dot_col_row", jnp.dot, [sq, sq], [P(None, "a"), P("a", None)])
    case("dot_row_row", jnp.dot, [sq, sq], [P("a", None), P("a", None)])
    case("dot_rep_col", jnp.dot, [sq, sq], [P(), P(None, "b")])
    case("dot_row_rep", jnp.dot, [sq, sq], [P("a", None), P()])
    case("dot_colb_rowb", jnp.dot, [sq, sq], [P(None, "b"), P("b", None)])
    case("dot_ab_ba", jnp.dot, [sq, sq], [P("a", "b"), P("b", "a")])
    case("add_row_col", jnp.add, [sq, sq], [P("a", None), P(None, "b")])
    case("add_ab_ba", jnp.add, [sq, sq], [P("a", "b"), P("b", "a")])
    case("add_row_rep", jnp.add, [sq, sq], [P("a", None), P()])
    case("add_bcast_row", lambda x, b: x + b, [sq, (16,)], [P("a", "b"), P()])
    case("add_bcast_sharded", lambda x, b: x + b, [sq, (16,)], [P("a", None), P("b")])
    case("sum0", lambda x: x.sum(axis=0), [sq], [P("a", "b")])
    case("sum1", lambda x: x.sum(axis=1), [sq], [P("a", "b")])
    case("sum_all", lambda x: x.sum(), [sq], [P("a", "b")])
    case("max0", lambda x: x.max(axis=0), [sq], [P("a", "b")])
    case("mean_rows", lambda x: x.mean(axis=1), [sq], [P("a", None)])
    case("transpose", lambda x: x.T, [sq], [P("a", "b")])
    case("reshape_flat", lambda x: x.reshape(256), [sq], [P("a", None)])
    case("reshape_split", lambda x: x.reshape(4, 4, 16), [sq], [P("a", "b")])
    case("reshape_merge_b", lambda x: x.reshape(16 * 16), [sq], [P("a", "b")])
    case("slice_rows", lambda x: x[:8], [sq], [P("a", "b")])
    case("expand", lambda x: x[None], [sq], [P("a", "b")])
    case("concat0", lambda x, y: jnp.concatenate([x, y], 0), [sq, sq], [P("a", "b"), P("a", "b")])
    case("softmax_rows", lambda x: jax.nn.softmax(x, axis=-1), [sq], [P("a", "b")])
    case("wsc_ba", lambda x: jax.lax.with_sharding_constraint(x + 1, S(P("b", "a"))), [sq], [P("a", "b")])
    case("wsc_rep", lambda x: jax.lax.with_sharding_constraint(x + 1, S(P())), [sq], [P("a", "b")])
    case("relu_layer", lambda x, w, b: jnp.maximum(jnp.dot(x, w) + b, 0), [sq, sq, (16,)], [P("a", None), P(None, "b"), P("b")])
    case("mlp2", lambda x, w1, w2: jnp.dot(jnp.maximum(jnp.dot(x, w1), 0), w2), [sq, sq, sq],
         [P("a", None), P(None, "b"), P("b", None)])
    mesh24 = jax.make_mesh((2, 4), ("x", "y"))
    case("f_contract", lambda x: x.sum(axis=0), [(4, 8)], [P("x", "y")], mesh24)
    mesh8 = Mesh(jax.devices(), "x")
    case("layer_seed", lambda x, w, b: jax.nn.sigmoid(x @ w + b), [(32,), (32, 4), (4,)], [P("x"), P("x"), P()], mesh8)
    save("propagation.json", facts)

    # The seed's f_contract drawing and values, and f_contract_2's.
    x = jax.device_put(jnp.arange(32.0).reshape(4, 8), NamedSharding(mesh24, P("x", "y")))
    r = jax.jit(lambda x: x.sum(axis=0))(x)
    r2 = jax.jit(lambda x: jax.lax.with_sharding_constraint(x.sum(axis=0), NamedSharding(mesh8, P("x"))))(x)
    save("seed_contract.json", {"draw": draw(r), "repr": repr(r), "draw2": draw(r2), "repr2": repr(r2)})


def rng_sharded():
    facts = {}
    for mode in [False, True]:
        jax.config.update("jax_threefry_partitionable", mode)
        mesh = Mesh(jax.devices(), "x")
        x = jax.device_put(jnp.arange(24), NamedSharding(mesh, P("x")))
        f = jax.jit(lambda key, x: x + jax.random.uniform(key, x.shape))
        key = jax.random.key(42)
        text = f.lower(key, x).compile().as_text()
        facts["on" if mode else "off"] = {"collectives": collectives(text), "values": np.asarray(f(key, x)).tolist(),
                                          "repr": repr(f(key, x))}
    jax.config.update("jax_threefry_partitionable", True)
    save("rng_sharded.json", facts)


def uneven():
    facts = []
    for n, mesh_shape, names, spec in [(10, (4,), ("x",), P("x")), (9, (4,), ("x",), P("x")),
                                       (13, (8,), ("x",), P("x")), (5, (8,), ("x",), P("x"))]:
        devs = np.array(jax.devices()[: int(np.prod(mesh_shape))]).reshape(mesh_shape)
        mesh = Mesh(devs, names)
        s = NamedSharding(mesh, spec)
        y = jax.jit(lambda v: v * 2, out_shardings=s)(jnp.arange(n, dtype=jnp.float32))
        facts.append({"n": n, "mesh": list(mesh_shape), "indices": [[sh.device.id, sh.index[0].start, sh.index[0].stop]
                                                                      for sh in y.addressable_shards],
                      "shard_shape": list(s.shard_shape((n,))) if n % int(np.prod(mesh_shape)) == 0 else None})
    save("uneven.json", facts)


def errors():
    x = jnp.arange(24)
    s1 = NamedSharding(Mesh(jax.devices()[:4], "x"), P("x"))
    s2 = NamedSharding(Mesh(jax.devices()[4:], "x"), P("x"))
    msgs = {}
    try:
        jax.device_put(x, s1) + jax.device_put(x, s2)
    except Exception as e:
        msgs["device_sets"] = f"{type(e).__name__}: {e}"
    devices = jax.devices()
    perm = [devices[i] for i in [0, 1, 2, 3, 6, 7, 4, 5]]
    try:
        jax.device_put(x, NamedSharding(Mesh(devices, "x"), P("x"))) + jax.device_put(x, NamedSharding(Mesh(perm, "x"), P("x")))
    except Exception as e:
        msgs["device_order"] = f"{type(e).__name__}: {e}"
    mesh = jax.make_mesh((4, 2), ("a", "b"))
    for name, fn in [("unknown_axis", lambda: NamedSharding(mesh, P("c"))),
                     ("dup_axis", lambda: NamedSharding(mesh, P("a", "a"))),
                     ("rank", lambda: jax.device_put(jnp.zeros((8,)), NamedSharding(mesh, P("a", "b")))),
                     ("mesh_size", lambda: jax.make_mesh((4, 4), ("a", "b"))),
                     ("uneven_put", lambda: jax.device_put(jnp.zeros((9,)), NamedSharding(mesh, P("a")))),
                     ("vis_rank3", lambda: jax.debug.visualize_array_sharding(jnp.zeros((2, 2, 2))))]:
        try:
            fn()
            msgs[name] = None
        except Exception as e:
            msgs[name] = f"{type(e).__name__}: {e}"
    save("errors.json", msgs)


def init_layer(key, n_in, n_out):
    k1, k2 = jax.random.split(key)
    W = jax.random.normal(k1, (n_in, n_out)) / jnp.sqrt(n_in)
    b = jax.random.normal(k2, (n_out,))
    return W, b


def init_model(key, layer_sizes, batch_size):
    key, *keys = jax.random.split(key, len(layer_sizes))
    params = list(map(init_layer, keys, layer_sizes[:-1], layer_sizes[1:]))
    key, *keys = jax.random.split(key, 3)
    inputs = jax.random.normal(keys[0], (batch_size, layer_sizes[0]))
    targets = jax.random.normal(keys[1], (batch_size, layer_sizes[-1]))
    return params, (inputs, targets)


def predict(params, inputs):
    for W, b in params:
        outputs = jnp.dot(inputs, W) + b
        inputs = jnp.maximum(outputs, 0)
    return outputs


def loss(params, batch):
    inputs, targets = batch
    predictions = predict(params, inputs)
    return jnp.mean(jnp.sum((predictions - targets) ** 2, axis=-1))


def mlp():
    facts = {}
    for label, sizes, batch_size, steps in [("tiny", [32, 64, 64, 64, 10], 64, 30),
                                            ("small", [784, 2048, 2048, 2048, 10], 2048, 30)]:
        for mode in [False, True]:
            jax.config.update("jax_threefry_partitionable", mode)
            params, batch = init_model(jax.random.key(0), sizes, batch_size)
            mesh = jax.make_mesh((8,), ("batch",))
            batch = jax.device_put(batch, NamedSharding(mesh, P("batch")))
            params = jax.device_put(params, NamedSharding(mesh, P()))
            loss_jit = jax.jit(loss)
            gradfun = jax.jit(jax.grad(loss))
            l0 = float(loss_jit(params, batch))
            g = gradfun(params, batch)
            gsum = [[float(jnp.sum(dW)), float(jnp.sum(db))] for dW, db in g]
            losses = [l0]
            for i in range(steps):
                grads = gradfun(params, batch)
                params = [(W - 1e-5 * dW, b - 1e-5 * db) for (W, b), (dW, db) in zip(params, grads)]
            losses.append(float(loss_jit(params, batch)))
            facts[f"{label}_{'on' if mode else 'off'}"] = {"loss_init": l0, "loss_after": losses[-1],
                                                            "grad_sums": gsum, "steps": steps}
            print(label, mode, facts[f"{label}_{'on' if mode else 'off'}"], flush=True)
    jax.config.update("jax_threefry_partitionable", True)
    save("mlp.json", facts)


which = sys.argv[2].split(",") if len(sys.argv) > 2 else None
for s in [visualize, reprs, prng, propagation, rng_sharded, errors, mlp]:
    if which and s.__name__ not in which:
        continue
    section(s)
print("jax", jax.__version__)
