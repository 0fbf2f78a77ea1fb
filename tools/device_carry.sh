#!/usr/bin/env bash
# Packs what the lent device machine (16 cores, JAX and PyTorch, no package
# registry) needs to run the benchmarks: the built benchmarks and samples,
# libtessel.so, and the shared libraries it loads that the device lacks
# (LLVM, oneTBB, oneDNN, OpenBLAS, FFTW, Open MPI). Everything goes to .carry/
# (git-ignored); with the working tree it must stay under the 64 MiB a run may
# carry, so libtessel travels stripped and compressed, and ICU's 31 MiB data
# library (loaded by libxml2, which LLVM links for a feature the JIT never
# calls) is replaced by a library holding an empty ICU data symbol.
#
#   tools/device_carry.sh            then, as the device `run` command with carry [".carry"]:
#   bash tools/device_bench.sh       (unpacks into /tmp/L, runs the benchmarks and JAX's side into $OUT)
set -euo pipefail
cd "$(dirname "$0")/.."
ninja -C build >/dev/null
mkdir -p .carry
rm -f .carry/libtessel.so.0 .carry/jax_mlp_bench.py
for b in matmul mlp elementwise scaling dispatch dtypes linalg collectives; do strip -o .carry/bench_$b build/tests/bench/bench_$b; done
strip -o .carry/mlp build/samples/mlp
strip -o .carry/test_codegen build/tests/test_codegen
strip -o .carry/test_dsl build/tests/test_dsl && xz -f -T2 .carry/test_dsl
# The bfloat16 kernels' own test and benchmark (AMX where the device has it).
g++ -std=c++20 -O2 -I. -DWITH_F32 tools/gemm_bf16_check.cpp codegen/gemm_bf16_avx512.cpp codegen/gemm_avx512.cpp \
  -mavx512f -mavx512vl -mavx512bw -mavx512bf16 -mamx-tile -mamx-bf16 -mavx2 -mfma -O3 -pthread -o .carry/bf16check 2>/dev/null
strip --strip-unneeded -o .carry/libtessel.so.0 build/dsl/libtessel.so.0  # under its soname, which the binaries load
xz -f -T2 .carry/libtessel.so.0
if [ ! -f .carry/libs.tar.xz ]; then
  # The libraries libtessel.so and oneDNN pull in beyond glibc and libstdc++.
  libs=$(ldd build/tests/bench/bench_matmul |
    awk '/=> \// {print $3}' | grep -v -E 'libtessel|libicudata|lib(c|m|stdc\+\+|gcc_s|pthread|dl|rt)\.so' | sort -u)
  stage=$(mktemp -d)
  tar chf - -C / $(for l in $libs; do echo "${l#/}"; done) | tar xf - -C "$stage"  # h: the sonames, as files
  icu=$(ldd build/tests/bench/bench_matmul | awk '/libicudata/ {print $1}')
  sym=$(nm -D "$stage"/lib/x86_64-linux-gnu/libicuuc.so.* | awk '$1 == "U" && $2 ~ /^icudt[0-9]+_dat$/ {print $2}')
  echo "const char $sym[64] = {0};" > "$stage/icu.c"
  cc -shared -fPIC -Wl,-soname,"$icu" -o "$stage/lib/x86_64-linux-gnu/$icu" "$stage/icu.c" && rm "$stage/icu.c"
  tar cf - -C "$stage" . | xz -9 -T2 > .carry/libs.tar.xz
  rm -rf "$stage"
fi
# Every library the benchmarks load, but glibc's, must come from .carry or the tarball.
tmp=$(mktemp -d)
tar xJf .carry/libs.tar.xz -C "$tmp"
xz -dc .carry/libtessel.so.0.xz > "$tmp/libtessel.so.0"
for b in .carry/bench_* .carry/mlp .carry/test_codegen; do
  LD_LIBRARY_PATH=$tmp:$tmp/lib/x86_64-linux-gnu:$tmp/usr/lib/llvm-19/lib:$tmp/usr/lib/x86_64-linux-gnu/openblas-serial \
    ldd "$b" | awk -v t="$tmp" '/=>/ && $3 !~ "^" t && $1 !~ /^lib(c|m|stdc\+\+|gcc_s|pthread|dl|rt)\.so/ {print; bad=1} END {exit bad}' ||
    { echo "device_carry.sh: $b loads libraries from outside .carry (above)" >&2; rm -rf "$tmp"; exit 1; }
done
# The benchmarks run there as they will: a small matmul, its result checked, on the carried libraries alone.
LD_LIBRARY_PATH=$tmp:$tmp/lib/x86_64-linux-gnu:$tmp/usr/lib/llvm-19/lib:$tmp/usr/lib/x86_64-linux-gnu/openblas-serial \
  .carry/bench_matmul 256 1 >/dev/null || { echo "device_carry.sh: bench_matmul fails on the carried libraries" >&2; rm -rf "$tmp"; exit 1; }
rm -rf "$tmp"
du -sh .carry
echo "with the working tree: $(( ($(du -sb .carry | cut -f1) + $(git ls-files -z | xargs -0 du -cb | tail -1 | cut -f1)) / 1048576 )) MiB (64 at most)"
