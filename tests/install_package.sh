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
# The Python module, when this build has it: imported from the moved prefix (libwaco.so found
# through its relative RUNPATH, the dataset in the prefix's share/), a plan against SciPy.
pydir=$(ls -d "$moved"/lib/python3*/dist-packages 2>/dev/null || true)
if [[ -n $pydir && -d $pydir/waco_hybrid ]]; then
  PYTHONPATH=$pydir "${WACO_PYTHON:-/usr/bin/python3}" - "$moved" "$src/examples/bcsstk13.mtx.gz" <<'PY' ||
import sys
import numpy as np
import waco_hybrid
moved, example = sys.argv[1], sys.argv[2]
assert waco_hybrid.__file__.startswith(moved), waco_hybrid.__file__
libs = [l.split()[-1] for l in open("/proc/self/maps") if "libwaco.so" in l]
assert libs and all(l.startswith(moved) for l in libs), libs
assert waco_hybrid._waco._dataset_dir().startswith(moved + "/share/waco-hybrid")
assert len(waco_hybrid.dataset("mttkrp", groups=True)) > 0
A = waco_hybrid.load(example)
import scipy.sparse
csr = scipy.sparse.csr_array(A.csr_arrays()[::-1], shape=A.shape)
x = np.linspace(-1, 1, A.shape[1], dtype=np.float32)
y = waco_hybrid.make_plan(csr, "spmv", "csr") @ x
want = csr @ x
assert np.allclose(y, want, rtol=1e-4, atol=1e-4 * abs(want).max()), abs(y - want).max()
PY
    { echo "the installed Python module failed"; exit 1; }
fi
echo "install_package: ok"
