#!/usr/bin/env bash
# The example job on a fresh Debian 12 machine: install what is needed, build, then run the main
# job (tune) and the other subcommands on the bundled example matrix (examples/bcsstk13.mtx.gz).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
waco=${WACO_BUILD_DIR:-build}/experiments/waco-hybrid
example=examples/bcsstk13.mtx.gz
impls=csr,eigen
if "$waco" run --help | grep -q "rsb-tuned"; then impls=csr,eigen,rsb,rsb-tuned; fi

out=${WACO_BUILD_DIR:-build}/example
mkdir -p "$out"

set -x
# The main job: tune, the hybrid (the default search): the shipped cost model ranks every
# admissible SpMV schedule, its best 20 are timed side by side with csr (verified first, hopeless
# ones abandoned early), and a gain is decided on fresh runs of the winner beside csr; the winner
# (or csr, when nothing beats it beyond the noise) with its speedup and interval, and its drop-in
# C++ header. Then the exhaustive search of the same space as the oracle beside it (the research
# claim: the hybrid's kernel within a few percent of the oracle's at a fraction of its time), and
# SpMM through the hybrid. Measurements are kept in a database under $out, decisions in the
# tuning cache: running this again answers from them instead of measuring again.
"$waco" tune --kernel spmv --db "$out/results.sqlite" -o "$out/tuned_spmv.hpp" "$example"
"$waco" tune --kernel spmv --search exhaustive --db "$out/results.sqlite" --no-plan-cache "$example"
"$waco" tune --kernel spmm --db "$out/results.sqlite" -o "$out/tuned_spmm.hpp" "$example"
# Where the cache sizes the tile model uses come from (sysfs, CPUID or the measured probe).
"$waco" info --caches
"$waco" info "$example"
# Baselines and generated kernels (SuperSchedules compiled on first use, then cached) side by side.
"$waco" bench --kernel spmv --impl "$impls" --schedule csr --schedule bcsr4x4 --repeat 20 "$example"
"$waco" bench --kernel spmm --impl "$impls",jstream --schedule csr --repeat 10 "$example"
"$waco" run --kernel sddmm --schedule csr --check "$example"
# The locality signature and the tile sizes the data-movement model picks from it.
"$waco" signature "$example"
"$waco" tile --kernel spmm "$example"
# The WACONet embedding of the matrix and what it costs (when built with LibTorch).
"$waco" features --arch small "$example"
