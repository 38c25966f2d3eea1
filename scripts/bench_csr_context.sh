#!/usr/bin/env bash
# Diagnostic (issue 33, session 57): does the csr baseline's parallel SpMV loop slow down when it
# is timed round-robin with other OpenMP kernels, as in a tune's side-by-side child?
#   usage: scripts/bench_csr_context.sh MATRIX.mtx [mapping]   (needs build/kernels/libwaco_kernels.a)
#   mapping (session 61): copies of the csr loop alone, round-robin, each after 1 ms of settle
#   calls, its rows dealt to the threads dynamically (the baseline), in the same chunks round-robin
#   (static,chunk) or in one block a thread, with and without the software counts read before
#   each timed run (tune/README.md, "Dynamic chunks and the caches")
#   env: WACO_CPU_LOCK (a file held exclusively around each run)
# On the AMD EPYC Zen 5 VM, f64, ca-HepTh: csr 19 us alone; among five dynamic,1 blocked kernels
# 37.7 us; among five static ones 21.7 us (tune/README.md, "What the fresh runs do not remove").
set -euo pipefail
cd "$(dirname "$0")/.."
m=${1:?usage: scripts/bench_csr_context.sh MATRIX.mtx [mapping]}
mode=${2:-}
[ -f build/kernels/libwaco_kernels.a ] || { echo "error: build/kernels/libwaco_kernels.a not built (run scripts/build.sh)" >&2; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
c++ -O3 -march=native -std=c++17 -fopenmp -Ikernels/include scripts/csr_context.cpp \
  build/kernels/libwaco_kernels.a -lz -o "$out/csr_context"
run=()
[ -n "${WACO_CPU_LOCK:-}" ] && run=(flock -x "$WACO_CPU_LOCK")
if [ "$mode" = mapping ]; then
  for k in 1 2; do
    for p in "" probe; do "${run[@]}" "$out/csr_context" "$m" "$k" mapping $p; done
  done
  exit 0
fi
for k in 1 2 6; do
  for s in dynamic static; do "${run[@]}" "$out/csr_context" "$m" "$k" "$s"; done
done
