#!/usr/bin/env bash
# ctest "report_browser" (labels browser, cli): `waco-hybrid report` end to end in a real browser.
# ablate (spmv; exhaustive, hybrid, random; 1 thread) on examples/bcsstk13.mtx.gz and a generated
# banded matrix, then report, then headless Chromium loads the page from file:// twice: once to
# dump the DOM after the page's own self-check ran, once for a screenshot.
#
# Fails when: the page's self-check (data-selfcheck on <body>) is not "ok N" with N the number of
# plots the report drew (report.json's "plots" and the page's <figure class="plot"> count);
# Chromium logged a console message or an uncaught exception (Chromium 156 logs every console
# message as "INFO:CONSOLE:<line>]" whatever its level, console.error included; the page logs
# nothing, so any CONSOLE line is an error); the page refers to anything external; the screenshot
# is missing, not a PNG or not 1400x3000.
#
# Usage: WACO=build/experiments/waco-hybrid SRC=. [OUT=dir] bash tests/report_browser.sh
# OUT (default <build>/test-scratch/report_browser) keeps the database, report.html/.csv/.json,
# the DOM, Chromium's logs and the screenshot report.png.
# Exit codes: 0 pass, 1 fail, 77 skipped (no chromium or gnuplot, or every matrix left out as
# busy: the page is checked without plots; the reason is printed).
set -uo pipefail

SKIP=77
skip() { echo "SKIP: $*"; exit $SKIP; }
fail() { echo "FAIL: $*"; exit 1; }

HERE=$(cd "$(dirname "$0")" && pwd)
SRC=${SRC:-$HERE/..}
WACO=${WACO:-}
CHROMIUM=/usr/bin/chromium
[ -n "$WACO" ] || fail "set WACO to the waco-hybrid binary (ctest does)"
[ -x "$WACO" ] || fail "waco-hybrid binary not found: $WACO (build it first)"
[ -x "$CHROMIUM" ] || skip "$CHROMIUM is not installed (scripts/setup.sh installs chromium)"
command -v gnuplot > /dev/null || skip "gnuplot is not installed (scripts/setup.sh installs gnuplot-nox)"

OUT=${OUT:-$(dirname "$WACO")/../test-scratch/report_browser}
rm -rf "$OUT"
mkdir -p "$OUT" || fail "cannot create $OUT"
T=$(cd "$OUT" && pwd)

# Prints a file's last lines, indented, after a failure.
show() { [ -s "$1" ] && { echo "--- $1 (last lines)"; tail -n "${2:-20}" "$1" | sed 's/^/  /'; }; }

echo "== generating a banded matrix"
"$WACO" generate --kind banded --rows 2000 --bandwidth 3 --seed 5 -o "$T/banded.mtx" \
  > "$T/generate.out" 2>&1 || { show "$T/generate.out"; fail "generate failed"; }

echo "== ablate (spmv: exhaustive, hybrid, random) on 2 matrices"
t0=$SECONDS
timeout 480 "$WACO" ablate --kernel spmv --configs exhaustive,hybrid,random --db "$T/a.sqlite" \
  --threads 1 -q "$SRC/examples/bcsstk13.mtx.gz" "$T/banded.mtx" > "$T/ablate.out" 2> "$T/ablate.err"
rc=$?
(( rc == 0 )) || { show "$T/ablate.err"; fail "ablate exited with $rc"; }
echo "ablate took $((SECONDS - t0))s"

echo "== report"
"$WACO" report --db "$T/a.sqlite" -o "$T/report.html" > "$T/report.out" 2> "$T/report.err"
rc=$?
(( rc == 0 )) || { show "$T/report.err"; fail "report exited with $rc"; }
sed 's/^/  /' "$T/report.out"
for f in report.html report.csv report.json; do [ -s "$T/$f" ] || fail "report wrote no $f"; done
figures=$(grep -o '<figure class="plot"' "$T/report.html" | wc -l)
json_plots=$(grep -E '^  "plots": [0-9]+' "$T/report.json" | grep -oE '[0-9]+')
[ "$figures" = "$json_plots" ] || fail "the page has $figures plot figures, report.json says ${json_plots:-nothing}"
# Busy machines do not make results: when other processes disturbed the side-by-side runs of
# every matrix, the report leaves them all out and draws no plot; the page is still checked in
# the browser, and the test says it was skipped.
left_out=$(grep -oE '"busy_matrices_left_out": [0-9]+' "$T/report.json" | grep -oE '[0-9]+$' | head -1)
all_busy=0
[ "${left_out:-0}" -lt 2 ] || all_busy=1
if (( ! all_busy )); then
  (( figures >= 4 )) || fail "only $figures plots (speedup, claimed vs delivered, share CDF and tuning time are always drawn here)"
  for name in speedup-over-csr claimed-vs-delivered share-of-oracle-cdf tune-time-vs-share; do
    grep -q "data-plot=\"$name\"" "$T/report.html" || fail "no $name plot in the page"
  done
fi
if grep -nE 'src=|<link|@import|url\(http' "$T/report.html" | head -5; then
  fail "the page refers to something external (lines above)"
fi

run_chromium() {
  # $1: log file; the rest: extra arguments and the URL.
  local log=$1
  shift
  timeout 120 "$CHROMIUM" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync \
    --user-data-dir="$T/profile" --enable-logging=stderr --v=0 --virtual-time-budget=5000 \
    "$@" 2> "$log"
}

echo "== headless Chromium: the page's self-check"
run_chromium "$T/chromium.log" --dump-dom "file://$T/report.html" > "$T/dom.html"
rc=$?
(( rc == 0 )) || { show "$T/chromium.log"; fail "chromium --dump-dom exited with $rc"; }
selfcheck=$(grep -o 'data-selfcheck="[^"]*"' "$T/dom.html" | head -1)
[ -n "$selfcheck" ] || { show "$T/chromium.log"; fail "the self-check did not run (no data-selfcheck in the DOM, $T/dom.html)"; }
echo "  $selfcheck"
[ "$selfcheck" = "data-selfcheck=\"ok $figures\"" ] || fail "self-check says $selfcheck, expected \"ok $figures\""
if grep -E 'CONSOLE|Uncaught' "$T/chromium.log"; then
  fail "console messages while loading the page (above; full log $T/chromium.log)"
fi

echo "== headless Chromium: screenshot"
rm -f "$T/report.png"
run_chromium "$T/chromium-screenshot.log" --screenshot="$T/report.png" --window-size=1400,3000 \
  "file://$T/report.html" > /dev/null
rc=$?
(( rc == 0 )) || { show "$T/chromium-screenshot.log"; fail "chromium --screenshot exited with $rc"; }
[ -s "$T/report.png" ] || fail "no screenshot $T/report.png"
if grep -E 'CONSOLE|Uncaught' "$T/chromium-screenshot.log"; then
  fail "console messages while taking the screenshot (above)"
fi
# A PNG of 1400x3000: the signature, then IHDR's width and height (big-endian, bytes 16-23).
[ "$(head -c 8 "$T/report.png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] ||
  fail "$T/report.png is not a PNG"
size=$(od -An -tu1 -j16 -N8 "$T/report.png" |
  awk '{ printf "%dx%d", (($1*256+$2)*256+$3)*256+$4, (($5*256+$6)*256+$7)*256+$8 }')
[ "$size" = 1400x3000 ] || fail "the screenshot is $size, expected 1400x3000"
bytes=$(stat -c %s "$T/report.png")
(( bytes > 20000 )) || fail "the screenshot is only $bytes bytes (a blank page?)"

(( ! all_busy )) || skip "the machine was busy: report left out both matrices (their side-by-side runs were disturbed), so no plot was drawn; the page itself passed in Chromium"
echo "PASS: $figures plots drawn and self-checked in Chromium, no console messages"
echo "screenshot: $T/report.png (the page: $T/report.html)"
