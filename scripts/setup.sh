#!/usr/bin/env bash
# Install the Debian packages waco-hybrid needs to build and test (Debian 12).
# Idempotent: packages already present are skipped. Works as root or through sudo.
# Downloads nothing but Debian packages.
set -euo pipefail

PACKAGES=(
  build-essential cmake pkg-config git
  libeigen3-dev          # eigen baseline
  libboost-graph-dev     # power-law / small-world generators
  catch2                 # tests (Catch2 v2)
  libcli11-dev           # command line
  nlohmann-json3-dev     # JSON output
  zlib1g-dev             # .mtx.gz / .tns.gz
  librsb-dev             # rsb baselines
  libsqlite3-dev         # results database
  libhnswlib-dev         # ANN index (learned/)
  likwid                 # hardware counters, where the CPU allows
  libtorch-dev           # learned cost model (learned/)
  libopenblas0-openmp    # fast BLAS for LibTorch (the default reference BLAS is ~30x slower)
  jq                     # JSON in the benchmark scripts (scripts/bench_oracle.sh)
  gnuplot-nox            # the plots of waco-hybrid report (SVG, no X11)
  chromium               # the report's browser test (tests/report_browser.sh, headless)
  python3-dev            # the Python module waco_hybrid (python/): headers of Debian's python3
  python3-pybind11       # its bindings (pybind11, CMake config in pybind11-dev)
  python3-numpy          # its arrays
  python3-scipy          # its sparse matrices, and SciPy's products in the Python tests
  python3-pytest         # the Python tests (tests/python, run by ctest)
)

if [ "$(id -u)" -eq 0 ]; then SUDO=""; elif command -v sudo >/dev/null; then SUDO="sudo"; else
  echo "error: setup.sh needs root or sudo to install packages" >&2; exit 1; fi

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#PACKAGES[@]} packages already installed"
else
  echo "setup: installing ${#missing[@]} Debian package(s): ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  echo "setup: done"
fi
