#!/usr/bin/env bash
# Installs the build tree into a fresh prefix and builds and runs tests/package (a separate
# project using find_package(WacoHybrid)) against it, with the build tree out of reach: the
# consumer must find the library, its header, the CLI and the shipped model in the prefix.
# Usage: install_package.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$(realpath "$1")
src=$(realpath "$2")
work=$build/test-scratch/install-package
rm -rf "$work"
mkdir -p "$work"
cmake --install "$build" --prefix "$work/prefix" > "$work/install.log"
for f in bin/waco-hybrid include/waco/waco.hpp share/waco-hybrid/models/spmv.model; do
  [[ -e $work/prefix/$f ]] || { echo "not installed: $f"; exit 1; }
done
ls "$work"/prefix/lib*/libwaco.so* > /dev/null
ls "$work"/prefix/lib*/cmake/WacoHybrid/WacoHybridConfig.cmake > /dev/null
# Nothing of LibTorch, SQLite or likwid in the public header.
if grep -E '#include <(torch|sqlite|likwid|nlohmann)' "$work/prefix/include/waco/waco.hpp"; then
  echo "a third-party header in waco.hpp"; exit 1
fi
cmake -S "$src/tests/package" -B "$work/consumer" -DCMAKE_PREFIX_PATH="$work/prefix" \
  -DCMAKE_BUILD_TYPE=Release > "$work/configure.log"
grep "consumer: WacoHybrid" "$work/configure.log"
cmake --build "$work/consumer" > "$work/build.log"
# The installed CLI, not the build tree's: no WACO_HYBRID_CLI, and a copy of the prefix moved
# elsewhere must still work (relocatable).
mv "$work/prefix" "$work/moved-prefix"
unset WACO_HYBRID_CLI
mkdir -p "$work/scratch"
libdir=$(dirname "$(ls "$work"/moved-prefix/lib*/libwaco.so)")
LD_LIBRARY_PATH=$libdir "$work/consumer/consumer" "$src/examples/bcsstk13.mtx.gz" "$work/scratch" 2>&1 ||
  { echo "the consumer failed"; exit 1; }
# The installed lite CLI runs a command that needs LibTorch as the installed waco-hybrid-torch
# beside it (when this build has LibTorch): a tiny WACONet embedding of the example.
if [[ -x $work/moved-prefix/bin/waco-hybrid-torch ]]; then
  "$work/moved-prefix/bin/waco-hybrid" features --arch tiny --json "$src/examples/bcsstk13.mtx.gz" \
    > "$work/features.json" || { echo "features through the installed waco-hybrid failed"; exit 1; }
  grep -q '"embedding"' "$work/features.json" || { echo "features printed no embedding"; exit 1; }
fi
echo "install_package: ok"
