#!/usr/bin/env bash
# The example job on a fresh Debian 12 machine: install what is needed, build, then run the most
# complete job that exists on the bundled example matrix (examples/bcsstk13.mtx.gz).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
waco=${WACO_BUILD_DIR:-build}/experiments/waco-hybrid
example=examples/bcsstk13.mtx.gz
impls=csr,eigen
if "$waco" run --help | grep -q "rsb-tuned"; then impls=csr,eigen,rsb,rsb-tuned; fi

set -x
"$waco" info "$example"
"$waco" bench --kernel spmv --impl "$impls" --repeat 20 "$example"
"$waco" bench --kernel spmm --impl "$impls" --repeat 10 "$example"
"$waco" run --kernel sddmm --impl csr --check "$example"
