# Sourced by the verdict benchmarks (bench_verdict.sh, bench_claims.sh) after their arguments:
# the binary, threads, work folder and CPU lock from the environment, checked.
#   needs: $default_out; sets: waco, threads, out, lock (a command prefix, maybe empty)
[ $# -gt 0 ] || { echo "error: no matrix given" >&2; exit 2; }
waco=${WACO:-build/experiments/waco-hybrid}
threads=${THREADS:-2}
out=${OUT:-$default_out}
[ -x "$waco" ] || { echo "error: $waco not built (run scripts/build.sh)" >&2; exit 1; }
command -v jq >/dev/null || { echo "error: jq is missing (scripts/setup.sh installs it)" >&2; exit 1; }
mkdir -p "$out"
lock=()
if [ -n "${WACO_CPU_LOCK:-}" ]; then lock=(flock -x "$WACO_CPU_LOCK"); fi
