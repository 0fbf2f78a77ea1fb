#!/usr/bin/env bash
# Packs what the lent device machine (16 cores, JAX and PyTorch, no package
# registry) needs to run the benchmarks: the built benchmarks and samples,
# libtessel.so, and the shared libraries it loads that the device lacks
# (LLVM, oneTBB, oneDNN for bench_matmul's comparison row). Everything goes
# to .carry/ (git-ignored, under the 64 MiB a run may carry).
#
#   tools/device_carry.sh            then, as the device `run` command with carry [".carry"]:
#   mkdir -p /tmp/L && tar xJf .carry/libs.tar.xz -C /tmp/L &&
#   export LD_LIBRARY_PATH=$PWD/.carry:/tmp/L/lib/x86_64-linux-gnu:/tmp/L/usr/lib/llvm-19/lib &&
#   TESSEL_BENCH_PYTHON=/opt/torch/.venv/bin/python3 .carry/bench_mlp full 3
set -euo pipefail
cd "$(dirname "$0")/.."
ninja -C build >/dev/null
mkdir -p .carry
for b in matmul mlp elementwise scaling dispatch; do cp build/tests/bench/bench_$b .carry/; done
cp build/samples/mlp build/dsl/libtessel.so tools/jax_mlp_bench.py .carry/
if [ ! -f .carry/libs.tar.xz ]; then
  # The libraries libtessel.so and oneDNN pull in beyond glibc and libstdc++.
  libs=$(ldd build/tests/bench/bench_matmul |
    awk '/=> \// {print $3}' | grep -v -E 'libtessel|lib(c|m|stdc\+\+|gcc_s|pthread|dl|rt)\.so' | sort -u)
  tar chJf .carry/libs.tar.xz -C / $(for l in $libs; do echo "${l#/}"; done)  # h: the sonames, as files
fi
du -sh .carry
