# The seed MLP's gradient step in JAX on 8 CPU devices (data parallel, and
# 4x2 data x model), for comparison with tests/bench/bench_mlp.cpp on the same
# machine: XLA_FLAGS=--xla_force_host_platform_device_count=8 JAX_PLATFORMS=cpu.
#   python3 tools/jax_mlp_bench.py [small|full] [reps]
import sys, time
import jax, jax.numpy as jnp
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P

full = len(sys.argv) > 1 and sys.argv[1] == "full"
reps = int(sys.argv[2]) if len(sys.argv) > 2 else 5
sizes, B = ([784, 8192, 8192, 8192, 10], 8192) if full else ([784, 2048, 2048, 2048, 10], 2048)


def init_layer(key, n_in, n_out):
    k1, k2 = jax.random.split(key)
    return jax.random.normal(k1, (n_in, n_out)) / jnp.sqrt(n_in), jax.random.normal(k2, (n_out,))


def init_model(key, layer_sizes, batch_size):
    key, *keys = jax.random.split(key, len(layer_sizes))
    params = list(map(init_layer, keys, layer_sizes[:-1], layer_sizes[1:]))
    key, *keys = jax.random.split(key, 3)
    return params, (jax.random.normal(keys[0], (batch_size, layer_sizes[0])),
                    jax.random.normal(keys[1], (batch_size, layer_sizes[-1])))


def loss(params, batch):
    inputs, targets = batch
    for W, b in params:
        outputs = jnp.dot(inputs, W) + b
        inputs = jnp.maximum(outputs, 0)
    return jnp.mean(jnp.sum((outputs - targets) ** 2, axis=-1))


gradfun = jax.jit(jax.grad(loss))


def timeit(name, params, batch):
    jax.block_until_ready(gradfun(params, batch))
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        jax.block_until_ready(gradfun(params, batch))
        ts.append(time.perf_counter() - t)
    ts.sort()
    print(f"jax {jax.__version__}, {name}: {ts[len(ts) // 2] * 1e3:.1f} ms (median of {reps})", flush=True)


params, batch = init_model(jax.random.key(0), sizes, B)
one = jax.sharding.SingleDeviceSharding(jax.devices()[0])
timeit("1 device", jax.device_put(params, one), jax.device_put(batch, one))
# Auto axes, as the tutorial (JAX 0.11 defaults to Explicit ones).
mesh = jax.make_mesh((8,), ("batch",), axis_types=(AxisType.Auto,))
timeit("8 devices, data parallel", jax.device_put(params, NamedSharding(mesh, P())),
       jax.device_put(batch, NamedSharding(mesh, P("batch"))))
mesh = jax.make_mesh((4, 2), ("batch", "model"), axis_types=(AxisType.Auto,) * 2)
rep = NamedSharding(mesh, P())
(W1, b1), (W2, b2), (W3, b3), (W4, b4) = params
pm = [(jax.device_put(W1, rep), jax.device_put(b1, rep)),
      (jax.device_put(W2, NamedSharding(mesh, P(None, "model"))), jax.device_put(b2, NamedSharding(mesh, P("model")))),
      (jax.device_put(W3, NamedSharding(mesh, P("model", None))), jax.device_put(b3, rep)),
      (jax.device_put(W4, rep), jax.device_put(b4, rep))]
timeit("4x2 data x model", pm, jax.device_put(batch, NamedSharding(mesh, P("batch", None))))
