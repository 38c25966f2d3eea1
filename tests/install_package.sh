#!/usr/bin/env bash
# Installs the build tree into a fresh prefix and builds and runs tests/package (a separate
# project using find_package(WacoHybrid)) against it, with the build tree out of reach: the
# consumer must find the library, its header, the CLI, the measurement worker and the shipped
# model in the prefix.
# Usage: install_package.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$(realpath "$1")
src=$(realpath "$2")
work=$build/test-scratch/install-package
rm -rf "$work"
mkdir -p "$work"
cmake --install "$build" --prefix "$work/prefix" > "$work/install.log"
worker=libexec/waco-hybrid/waco-measure-worker
for f in bin/waco-hybrid $worker include/waco/waco.hpp share/waco-hybrid/models/spmv.model; do
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
# elsewhere must still work (relocatable). So must its measurement worker: found relative to the
# program (bin/../libexec/waco-hybrid), never by an absolute path, so the tune below measures
# with the moved prefix's worker or fails.
mv "$work/prefix" "$work/moved-prefix"
unset WACO_HYBRID_CLI WACO_MEASURE_WORKER
mkdir -p "$work/scratch"
libdir=$(dirname "$(ls "$work"/moved-prefix/lib*/libwaco.so)")
LD_LIBRARY_PATH=$libdir "$work/consumer/consumer" "$src/examples/bcsstk13.mtx.gz" "$work/scratch" 2>&1 ||
  { echo "the consumer failed"; exit 1; }
# The moved CLI measures with the moved worker; without it, it says where it looked and what to do.
moved=$work/moved-prefix
printf 'csr\norder=i,k format=UC parallel=i threads=1 chunk=16\n' > "$work/scratch/schedules.txt"
tune=("$moved/bin/waco-hybrid" tune --kernel spmv --schedules "$work/scratch/schedules.txt"
      --db "$work/scratch/results.sqlite" --cache-dir "$work/scratch/kernels" --no-plan-cache
      --repeat 3 --warmup 1 --confirm 0 --json "$src/examples/bcsstk13.mtx.gz")
"${tune[@]}" > "$work/tune.json" 2> "$work/tune.err" ||
  { cat "$work/tune.err"; echo "tune in the moved prefix failed"; exit 1; }
grep -q '"verdict"' "$work/tune.json" || { echo "tune in the moved prefix printed no report"; exit 1; }
mv "$moved/$worker" "$moved/$worker.away"
if "${tune[@]}" > /dev/null 2> "$work/tune-noworker.err"; then
  echo "tune succeeded without its measurement worker"; exit 1
fi
grep -q "cannot find waco-measure-worker.*$moved/$worker.*hint: install waco-hybrid" \
  "$work/tune-noworker.err" || { cat "$work/tune-noworker.err"; echo "unclear error without the worker"; exit 1; }
mv "$moved/$worker.away" "$moved/$worker"
# The installed lite CLI runs a command that needs LibTorch as the installed waco-hybrid-torch
# beside it (when this build has LibTorch): a tiny WACONet embedding of the example.
if [[ -x $work/moved-prefix/bin/waco-hybrid-torch ]]; then
  "$work/moved-prefix/bin/waco-hybrid" features --arch tiny --json "$src/examples/bcsstk13.mtx.gz" \
    > "$work/features.json" || { echo "features through the installed waco-hybrid failed"; exit 1; }
  grep -q '"embedding"' "$work/features.json" || { echo "features printed no embedding"; exit 1; }
fi
echo "install_package: ok"
