# JAX's side of the benchmark rows tessel compares with on a many-core host:
# the same work as bench_elementwise / bench_scaling / bench_matmul / bench_dtypes
# on 1 and 8 CPU devices (the MLP step is tools/jax_mlp_bench.py). Run as
#   XLA_FLAGS=--xla_force_host_platform_device_count=8 JAX_PLATFORMS=cpu python3 tools/jax_bench.py [reps]
# Each line: the work, the layout, the median time of reps calls after a warm-up.
import os, sys, time
import jax, jax.numpy as jnp
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P

reps = int(sys.argv[1]) if len(sys.argv) > 1 else 5
devs = jax.devices()
print(f"jax {jax.__version__}, {len(devs)} {devs[0].platform} devices, {os.cpu_count()} cores", flush=True)


def timeit(name, f, *args, n=reps):
    jax.block_until_ready(f(*args))
    ts = []
    for _ in range(n):
        t = time.perf_counter()
        jax.block_until_ready(f(*args))
        ts.append(time.perf_counter() - t)
    ts.sort()
    print(f"  jax {name}: {ts[len(ts) // 2] * 1e3:.2f} ms (median of {n}, best {ts[0] * 1e3:.2f})", flush=True)


def run(name, body):
    try:
        body()
    except Exception as e:  # one failing case does not stop the others
        print(f"  jax {name}: FAILED {type(e).__name__}: {e}", flush=True)


one = jax.sharding.SingleDeviceSharding(devs[0])
mesh = jax.make_mesh((len(devs),), ("x",), axis_types=(AxisType.Auto,))
rows = NamedSharding(mesh, P("x"))
n = 8192


def elementwise():
    x = jnp.linspace(-5, 5, n * n, dtype=jnp.float32).reshape(n, n)
    f = jax.jit(lambda x: 2 * jnp.sin(x) + 1)
    s = jax.jit(jnp.sin)
    x1, xd = jax.device_put(x, one), jax.device_put(x, rows)
    timeit(f"2*sin(x)+1 {n}^2 f32, 1 device", f, x1)
    timeit(f"2*sin(x)+1 {n}^2 f32, {len(devs)} devices P('x')", f, xd)
    timeit(f"sin {n}^2 f32, 1 device", s, x1)
    timeit(f"sin {n}^2 f32, {len(devs)} devices P('x')", s, xd)
    for name, g in [("2*x+1", lambda x: 2 * x + 1), ("2*exp(x)+1", lambda x: 2 * jnp.exp(x) + 1),
                    ("2*tanh(x)+1", lambda x: 2 * jnp.tanh(x) + 1), ("2*log1p(x)+1", lambda x: 2 * jnp.log1p(x) + 1)]:
        timeit(f"{name} {n}^2 f32, 1 device", jax.jit(g), x1)
    xb = jax.device_put(x.astype(jnp.bfloat16), one)
    timeit(f"2*sin(x)+1 {n}^2 bf16, 1 device", f, xb)
    timeit(f"x.T {n}^2 f32, 1 device", jax.jit(lambda x: x.T), x1)
    timeit(f"argmax(x, 1) {n}^2 f32, 1 device", jax.jit(lambda x: jnp.argmax(x, 1)), x1)


def dots():
    m = 4096
    a = jnp.linspace(-1, 1, m * m, dtype=jnp.float32).reshape(m, m)
    d = len(devs)
    mesh2 = jax.make_mesh((d // 2, 2), ("a", "b"), axis_types=(AxisType.Auto,) * 2)
    dot = jax.jit(jnp.dot)
    a1 = jax.device_put(a, one)
    timeit(f"dot {m}^2 row x col, 1 device", dot, a1, a1)
    timeit(f"dot {m}^2 row x col, {d} devices ({d // 2}x2)", dot, jax.device_put(a, NamedSharding(mesh2, P("a", None))),
           jax.device_put(a, NamedSharding(mesh2, P(None, "b"))))
    ab = jax.device_put(a.astype(jnp.bfloat16), one)
    timeit(f"matmul {m}^3 bf16 -> f32, 1 device", jax.jit(lambda a, b: jnp.matmul(a, b, preferred_element_type=jnp.float32)),
           ab, ab)
    ai = jax.device_put((a * 100).astype(jnp.int8), one)
    timeit(f"matmul {m}^3 int8 -> int32, 1 device", jax.jit(lambda a, b: jnp.matmul(a, b, preferred_element_type=jnp.int32)),
           ai, ai)
    b = jax.device_put(jnp.linspace(-1, 1, n * n, dtype=jnp.float32).reshape(n, n), one)
    timeit(f"matmul {n}^3 f32, 1 device", dot, b, b, n=3)


def linalg():
    m = 4096
    k = jax.random.key(0)
    a = jax.device_put(jax.random.normal(k, (m, m), jnp.float32) + m * jnp.eye(m, dtype=jnp.float32), one)
    b = jax.device_put(jax.random.normal(k, (m, 1), jnp.float32), one)
    timeit(f"solve {m}^2 f32, 1 device", jax.jit(jnp.linalg.solve), a, b, n=3)
    timeit(f"cholesky {m}^2 f32, 1 device", jax.jit(jnp.linalg.cholesky), a, n=3)
    timeit(f"inv {m}^2 f32, 1 device", jax.jit(jnp.linalg.inv), a, n=3)


for name, body in [("elementwise", elementwise), ("dots", dots), ("linalg", linalg)]:
    if len(sys.argv) <= 2 or name in sys.argv[2:]:
        run(name, body)
