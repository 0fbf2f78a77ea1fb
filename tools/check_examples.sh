#!/usr/bin/env bash
# tools/check_examples.sh BUILD_DIR: installs tessel from BUILD_DIR into a
# temporary prefix (DESTDIR), then builds and runs the out-of-tree consumers in
# examples/ against it, compiled with only the installed include path: the
# Meson one through tessel.pc, the CMake one through find_package(tessel).
# Also configures the Meson one with tessel as a subproject (the dependency
# that meson.override_dependency names). Exits non-zero on any failure.
set -euo pipefail
export TESSEL_DEVICE_COUNT=8  # the examples' meshes (2x4, 8)
unset TESSEL_CACHE_DIR TESSEL_TRACE TESSEL_LOG_COMPILES TESSEL_DUMP_DIR
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="$(cd "${1:?usage: tools/check_examples.sh BUILD_DIR}" && pwd)"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

DESTDIR="$TMP/stage" meson install -C "$BUILD" --quiet --no-rebuild
prefix="$TMP/stage$(meson introspect "$BUILD" --buildoptions | python3 -c '
import json, sys
print(next(o["value"] for o in json.load(sys.stdin) if o["name"] == "prefix"))')"
pcdir="$(dirname "$(find "$prefix" -name tessel.pc | head -n 1)")"
[ -f "$pcdir/tessel.pc" ] || { echo "no tessel.pc under $prefix" >&2; exit 1; }
# Nothing of the source tree is reachable: the consumers get the prefix only.
if grep -rqF "$ROOT" "$prefix/include" "$pcdir/tessel.pc"; then
  echo "installed files name the source tree" >&2; exit 1
fi

echo "== examples/meson (pkg-config, prefix $prefix)"
PKG_CONFIG_PATH="$pcdir" meson setup "$TMP/meson" "$ROOT/examples/meson" --wrap-mode=nofallback >"$TMP/meson.log" 2>&1 ||
  { cat "$TMP/meson.log" >&2; exit 1; }
ninja -C "$TMP/meson" >>"$TMP/meson.log" 2>&1 || { cat "$TMP/meson.log" >&2; exit 1; }
"$TMP/meson/hello"

echo "== examples/cmake (find_package, prefix $prefix)"
cmake -S "$ROOT/examples/cmake" -B "$TMP/cmake" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_BUILD_TYPE=Release >"$TMP/cmake.log" 2>&1 || { cat "$TMP/cmake.log" >&2; exit 1; }
cmake --build "$TMP/cmake" >>"$TMP/cmake.log" 2>&1 || { cat "$TMP/cmake.log" >&2; exit 1; }
"$TMP/cmake/grad"

echo "== examples/meson (tessel as a subproject: configure only)"
cp -r "$ROOT/examples/meson" "$TMP/sub"
mkdir -p "$TMP/sub/subprojects"
ln -s "$ROOT" "$TMP/sub/subprojects/tessel"
meson setup "$TMP/sub/build" "$TMP/sub" --force-fallback-for=tessel >"$TMP/sub.log" 2>&1 ||
  { cat "$TMP/sub.log" >&2; exit 1; }
grep -q "Dependency tessel found: YES" "$TMP/sub.log" ||
  { cat "$TMP/sub.log" >&2; echo "the subproject did not provide dependency('tessel')" >&2; exit 1; }
echo "examples: 2 built and run against the installed prefix, 1 configured as a subproject"
