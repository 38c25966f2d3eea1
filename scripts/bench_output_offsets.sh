#!/usr/bin/env bash
# Diagnostic (issue 33, session 79): a plan's speed when the caller's output lies 0, 16, 32 or 48
# bytes past a 64-byte line, against the baseline's (scripts/output_offsets.cpp, through libwaco).
#   usage: scripts/bench_output_offsets.sh FILE SCHEDULE [N]   (needs build/api/libwaco.so)
#   env: WACO_CPU_LOCK (a file held exclusively around the run)
# AMD Zen 4 VM, 2 threads, before generated kernels that add into the output's rows were staged:
# MTTKRP `order=i,k,l,j format=CCC chunk=128` on email_eu_core 700-760 us at +16/+48 against
# 402-420 aligned; after, 404-416 at every offset (codegen/README.md, "An output off a cache line").
set -euo pipefail
cd "$(dirname "$0")/.."
f=${1:?usage: scripts/bench_output_offsets.sh FILE SCHEDULE [N]}
s=${2:?usage: scripts/bench_output_offsets.sh FILE SCHEDULE [N]}
[ -f build/api/libwaco.so ] || { echo "error: build/api/libwaco.so not built (run scripts/build.sh)" >&2; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
c++ -O2 -std=c++17 -Iapi/include scripts/output_offsets.cpp -Lbuild/api -lwaco \
  -Wl,-rpath,"$PWD/build/api" -o "$out/output_offsets"
run=()
[ -n "${WACO_CPU_LOCK:-}" ] && run=(flock -x "$WACO_CPU_LOCK")
"${run[@]}" "$out/output_offsets" "$f" "$s" ${3:+"$3"}
