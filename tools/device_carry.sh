#!/usr/bin/env bash
# Packs what the lent device machine (16 cores, JAX and PyTorch, no package
# registry) needs to run the benchmarks: the built benchmarks and samples,
# libtessel.so, and the shared libraries it loads that the device lacks
# (LLVM, oneTBB, oneDNN for bench_matmul's comparison row). Everything goes
# to .carry/ (git-ignored, under the 64 MiB a run may carry).
#
#   tools/device_carry.sh            then, as the device `run` command with carry [".carry"]:
#   mkdir -p /tmp/L && tar xJf .carry/libs.tar.xz -C /tmp/L &&
#   export LD_LIBRARY_PATH=$PWD/.carry:/tmp/L/lib/x86_64-linux-gnu:/tmp/L/usr/lib/llvm-19/lib:/tmp/L/usr/lib/x86_64-linux-gnu/openblas-serial &&
#   TESSEL_BENCH_PYTHON=/opt/torch/.venv/bin/python3 .carry/bench_mlp full 3
set -euo pipefail
cd "$(dirname "$0")/.."
ninja -C build >/dev/null
mkdir -p .carry
for b in matmul mlp elementwise scaling dispatch; do cp build/tests/bench/bench_$b .carry/; done
cp build/samples/mlp tools/jax_mlp_bench.py .carry/
cp -L build/dsl/libtessel.so.0 .carry/  # under its soname, which the binaries load
if [ ! -f .carry/libs.tar.xz ]; then
  # The libraries libtessel.so and oneDNN pull in beyond glibc and libstdc++.
  libs=$(ldd build/tests/bench/bench_matmul |
    awk '/=> \// {print $3}' | grep -v -E 'libtessel|lib(c|m|stdc\+\+|gcc_s|pthread|dl|rt)\.so' | sort -u)
  tar chJf .carry/libs.tar.xz -C / $(for l in $libs; do echo "${l#/}"; done)  # h: the sonames, as files
fi
# Every library the benchmarks load, but glibc's, must come from .carry or the tarball.
tmp=$(mktemp -d)
tar xJf .carry/libs.tar.xz -C "$tmp"
for b in .carry/bench_* .carry/mlp; do
  LD_LIBRARY_PATH=$PWD/.carry:$tmp/lib/x86_64-linux-gnu:$tmp/usr/lib/llvm-19/lib:$tmp/usr/lib/x86_64-linux-gnu/openblas-serial \
    ldd "$b" | awk -v t="$tmp" -v c="$PWD/.carry" '/=>/ && $3 !~ "^(" t "|" c ")" && $1 !~ /^lib(c|m|stdc\+\+|gcc_s|pthread|dl|rt)\.so/ {print; bad=1} END {exit bad}' ||
    { echo "device_carry.sh: $b loads libraries from outside .carry (above)" >&2; rm -rf "$tmp"; exit 1; }
done
rm -rf "$tmp"
du -sh .carry
