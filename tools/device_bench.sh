#!/usr/bin/env bash
# Runs on the lent many-core machine what tools/device_carry.sh packed: tessel's
# benchmarks (PyTorch's rows in the same run) and JAX's side of the same work, on
# 8 CPU devices and 1. Everything goes to $OUT/bench.txt (the host to
# $OUT/host.txt), one section after another, each under its own time limit so
# that a slow one cannot cost the rest.
#   bash tools/device_bench.sh [sections...]   (default: all, in the order below)
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/device_out}
mkdir -p "$OUT"
L=/tmp/L
if [ ! -f $L/libtessel.so.0 ]; then
  mkdir -p $L && tar xJf .carry/libs.tar.xz -C $L && xz -dc .carry/libtessel.so.0.xz > $L/libtessel.so.0 || exit 1
  [ -f .carry/test_dsl.xz ] && xz -dc .carry/test_dsl.xz > $L/test_dsl && chmod +x $L/test_dsl
fi
export LD_LIBRARY_PATH=$L:$L/lib/x86_64-linux-gnu:$L/usr/lib/llvm-19/lib:$L/usr/lib/x86_64-linux-gnu/openblas-serial
export TESSEL_BENCH_PYTHON=$(command -v python3) PYTHONUNBUFFERED=1
jaxenv=(env XLA_FLAGS=--xla_force_host_platform_device_count=8 JAX_PLATFORMS=cpu)
{ date -u; nproc; lscpu; free -g; "$TESSEL_BENCH_PYTHON" -c 'import torch, jax; print("torch", torch.__version__, "threads", torch.get_num_threads(), "jax", jax.__version__)'; } > "$OUT/host.txt" 2>&1

deadline=${DEADLINE:-440}  # seconds: no section runs past it (the run's own limit is above it)
section() {  # name, seconds, command...
  local name=$1 limit=$2; shift 2
  (( limit > deadline - SECONDS )) && limit=$((deadline - SECONDS))
  (( limit < 20 )) && { echo "### $name skipped: the deadline"; return; }
  echo "### $name ($(date -u +%T)): $*"
  local s=$SECONDS
  timeout "$limit" "$@" 2>&1
  echo "### $name rc $? after $((SECONDS - s)) s"
}
all=(mlp jax_mlp scaling jax_elementwise jax_dots matmul dtypes elementwise jax_linalg linalg)
# Also: bf16 (the bfloat16 kernels' tests and benchmark, the bf16 tests of the suites, the mixed-precision
# sample against float32's losses), mlp_profile (the sharded steps' time per thunk).
for s in "${@:-${all[@]}}"; do
  case $s in
    mlp) section mlp 90 .carry/bench_mlp small 5 ;;
    jax_mlp) section jax_mlp 90 "${jaxenv[@]}" python3 tools/jax_mlp_bench.py small 5 ;;
    scaling) section scaling 60 .carry/bench_scaling ;;
    jax_elementwise) section jax_elementwise 60 "${jaxenv[@]}" python3 tools/jax_bench.py 5 elementwise ;;
    jax_dots) section jax_dots 90 "${jaxenv[@]}" python3 tools/jax_bench.py 5 dots ;;
    elementwise) section elementwise 90 .carry/bench_elementwise ;;
    matmul) section matmul 60 .carry/bench_matmul 8192 3 ;;
    dtypes) section dtypes 100 .carry/bench_dtypes ;;
    linalg) section linalg 90 .carry/bench_linalg ;;
    jax_linalg) section jax_linalg 90 "${jaxenv[@]}" python3 tools/jax_bench.py 3 linalg ;;
    bf16) section bf16check 90 .carry/bf16check
          section bf16_codegen 30 .carry/test_codegen -tc='*bfloat16*'
          section bf16_dsl 90 $L/test_dsl -tc='*bfloat16*,*preferred_element_type*,*scaled_matmul*'
          section mlp_f32 40 .carry/mlp --small --steps 5 --timing-loops 1
          section mlp_bf16 40 .carry/mlp --small --steps 5 --timing-loops 1 --dtype bfloat16 ;;
    mlp_profile) section mlp_profile 60 env TESSEL_PROFILE=1 .carry/bench_mlp small 3 sharded-only ;;
    turns) # large dots taking every core in turn (the default where the devices' threads fit the cores) or not
      for t in 1 0; do
        section "mlp TESSEL_DOT_TURNS=$t" 60 env TESSEL_DOT_TURNS=$t .carry/bench_mlp small 5
        section "scaling TESSEL_DOT_TURNS=$t" 30 env TESSEL_DOT_TURNS=$t .carry/bench_scaling
      done
      section "mlp_profile TESSEL_DOT_TURNS=0" 40 env TESSEL_DOT_TURNS=0 TESSEL_PROFILE=1 .carry/bench_mlp small 3 sharded-only ;;
    *) echo "device_bench.sh: no section $s" >&2; exit 2 ;;
  esac
done 2>&1 | tee "$OUT/bench.txt"
