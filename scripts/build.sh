#!/usr/bin/env bash
# Configure and build waco-hybrid (Release) into ${WACO_BUILD_DIR:-build}.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${WACO_BUILD_DIR:-build}
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=Release
cmake --build "$build_dir" -j"$(nproc)"
echo "build: $build_dir/experiments/waco-hybrid"
