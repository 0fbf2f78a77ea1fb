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
for s in "${@:-${all[@]}}"; do
  case $s in
    mlp) section mlp 90 .carry/bench_mlp small 5 ;;
    jax_mlp) section jax_mlp 90 "${jaxenv[@]}" python3 tools/jax_mlp_bench.py small 5 ;;
    scaling) section scaling 60 .carry/bench_scaling ;;
    jax_elementwise) section jax_elementwise 60 "${jaxenv[@]}" python3 tools/jax_bench.py 5 elementwise ;;
    jax_dots) section jax_dots 90 "${jaxenv[@]}" python3 tools/jax_bench.py 5 dots ;;
    elementwise) section elementwise 90 .carry/bench_elementwise ;;
    matmul) section matmul 60 .carry/bench_matmul 8192 3 ;;
    dtypes) section dtypes 60 .carry/bench_dtypes ;;
    linalg) section linalg 90 .carry/bench_linalg ;;
    jax_linalg) section jax_linalg 90 "${jaxenv[@]}" python3 tools/jax_bench.py 3 linalg ;;
    *) echo "device_bench.sh: no section $s" >&2; exit 2 ;;
  esac
done 2>&1 | tee "$OUT/bench.txt"
