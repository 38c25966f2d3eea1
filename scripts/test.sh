#!/usr/bin/env bash
# The test job on a fresh Debian 12 machine: install what is needed, build, run every test.
# Extra arguments go to ctest, e.g. `scripts/test.sh -L quick` for the quick subset.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
ctest --test-dir "${WACO_BUILD_DIR:-build}" --output-on-failure --timeout 1200 "$@"
