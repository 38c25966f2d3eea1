#!/usr/bin/env bash
# Racing (tune --abandon-factor): what abandoning hopeless candidates saves, and whether it
# changes the winners. Per matrix and kernel, two exhaustive tunes of the same admissible set,
# each with a fresh results database (nothing reused): racing off (--abandon-factor 0) and on
# (--abandon-factor FACTOR), in alternating order (off first for odd matrices) so that machine
# drift and first compilations hit both alike. Compares:
#   search_s    the search's wall time (tune --json search_s);
#   measure_s   the time of the measurements themselves, compilation excluded (sum over the
#               database of wall_s - compile_s): the part racing can save;
#   winners     the side-by-side winner (nominee) of each run, the verdict, and whether the
#               racing run abandoned any of the full run's 3 fastest side by side (the failure
#               racing must not have).
# Also, from the full run's timings, what other factors would have abandoned (a replay: the
# first two timed runs stand in for the warm-up and first timed run racing looks at).
# Prints a table row per run pair and writes OUT_DIR/racing.json. Needs jq and sqlite3.
#   usage: scripts/bench_racing.sh OUT_DIR FILE...
#   env:   KERNELS ("spmm sddmm"), FACTOR (3), THREADS (0 = all), WACO_BUILD_DIR (build),
#          REUSE=1 (keep the runs OUT_DIR already holds; only the summary is made again)
#   e.g.:  scripts/bench_racing.sh bench-results/racing ../shared/data/matrices/bcsstk13.mtx.gz
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -lt 2 ]; then
  sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
  exit 2
fi
out=$1
shift
kernels=${KERNELS:-spmm sddmm}
factor=${FACTOR:-3}
threads=${THREADS:-0}
waco=${WACO_BUILD_DIR:-build}/experiments/waco-hybrid
for tool in jq sqlite3; do
  command -v "$tool" >/dev/null || { echo "error: bench_racing.sh needs $tool" >&2; exit 1; }
done
mkdir -p "$out"

# measure_s of a database: the measurements' own time, compilation excluded.
measure_s() { sqlite3 "$1" "SELECT printf('%.3f', sum(wall_s - compile_s)) FROM measurements"; }

# The replay: for each factor, the candidates the full run's timings would have abandoned (the
# faster of the first two timed runs above factor x the best median so far, in search order,
# starting from the csr schedule's median), and whether the winner is among them.
replay() {  # db winner csr_median
  sqlite3 -json "$1" "SELECT s.text AS schedule, m.times_s, m.median_s, m.wall_s - m.compile_s
                      AS cost FROM measurements m JOIN schedules s ON s.id = m.schedule_id
                      WHERE m.status = 'ok' ORDER BY m.id" |
    jq --arg winner "$2" --argjson csr "$3" '
      [1.5, 2, 3, 5] | map(. as $f | reduce $all[0][] as $c (
          {best: $csr, abandoned: 0, saved: 0, winner_abandoned: false};
          ($c.times_s | fromjson) as $t |
          if ([$t[0], ($t[1] // $t[0])] | min) > $f * .best then
            .abandoned += 1 | .saved += $c.cost * (1 - 2 / ($t | length + 2)) |
            .winner_abandoned = (.winner_abandoned or $c.schedule == $winner)
          else .best = ([.best, $c.median_s] | min) end)
        | {factor: $f, abandoned, saved_s: .saved, winner_abandoned})' --slurpfile all /dev/stdin \
      --null-input 2>/dev/null || echo null
}

printf '%-22s %-6s %6s %9s %9s %6s %10s %10s %6s %s\n' matrix kernel cands "off s" "on s" \
  ratio "off meas" "on meas" aband "nominee (verdict off | on)"
rows=()
n=0
for file in "$@"; do
  n=$((n + 1))
  name=$(basename "$file" | sed 's/\.gz$//; s/\.mtx$//')
  for kernel in $kernels; do
    order="on off"
    if [ $((n % 2)) -eq 1 ]; then order="off on"; fi
    for mode in $order; do
      if [ "${REUSE:-0}" = 1 ] && [ -s "$out/${name}_${kernel}_${mode}.json" ]; then continue; fi
      f=0
      if [ "$mode" = on ]; then f=$factor; fi
      db="$out/${name}_${kernel}_${mode}.sqlite"
      rm -f "$db" "$db-wal" "$db-shm"
      "$waco" tune --no-plan-cache --kernel "$kernel" --search exhaustive --abandon-factor "$f" --threads "$threads" \
        --db "$db" --json -q "$file" > "$out/${name}_${kernel}_${mode}.json"
    done
    off="$out/${name}_${kernel}_off.json"
    on="$out/${name}_${kernel}_on.json"
    off_db="$out/${name}_${kernel}_off.sqlite"
    on_db="$out/${name}_${kernel}_on.sqlite"
    # The full run's 3 fastest side by side: did the racing run abandon any of them?
    top_off=$(jq -r '[.confirm.ranking[]? | select(.status == "ok") | .schedule][0:3] |
                     map("\u0027" + . + "\u0027") | join(",")' "$off")
    lost=0
    if [ -n "$top_off" ]; then
      lost=$(sqlite3 "$on_db" "SELECT count(*) FROM measurements m JOIN schedules s ON
                               s.id = m.schedule_id WHERE m.status = 'abandoned' AND
                               s.text IN ($top_off)")
    fi
    winner_off=$(jq -r '.verdict_detail.nominee // .best.schedule' "$off")
    row=$(jq -n --arg matrix "$name" --arg kernel "$kernel" --slurpfile off "$off" \
      --slurpfile on "$on" --argjson off_m "$(measure_s "$off_db")" \
      --argjson on_m "$(measure_s "$on_db")" --argjson lost "$lost" \
      --argjson replay "$(replay "$off_db" "$winner_off" "$(jq '.csr.median_s' "$off")")" '
      {matrix: $matrix, kernel: $kernel, candidates: $off[0].candidates,
       off: {search_s: $off[0].search_s, measure_s: $off_m, result: $off[0].best.schedule,
             nominee: $off[0].verdict_detail.nominee, verdict: $off[0].verdict,
             speedup: $off[0].speedup_over_csr},
       on: {search_s: $on[0].search_s, measure_s: $on_m, result: $on[0].best.schedule,
            nominee: $on[0].verdict_detail.nominee, verdict: $on[0].verdict,
            speedup: $on[0].speedup_over_csr, abandoned: $on[0].status_counts.abandoned,
            abandoned_s: $on[0].abandoned_s},
       same_result: ($off[0].best.schedule == $on[0].best.schedule),
       same_nominee: ($off[0].verdict_detail.nominee == $on[0].verdict_detail.nominee),
       full_top3_abandoned: $lost, replay: $replay}')
    rows+=("$row")
    echo "$row" | jq -r '[.matrix, .kernel, .candidates, (.off.search_s * 10 | round / 10),
        (.on.search_s * 10 | round / 10), ((.on.search_s / .off.search_s) * 100 | round / 100),
        .off.measure_s, .on.measure_s, .on.abandoned,
        (if .full_top3_abandoned > 0 then "LOST" elif .same_nominee then "same"
         else "differ" end) + " (" + .off.verdict + " | " + .on.verdict + ")"] |
        "\(.[0] | .[0:22] | . + " " * (22 - length)) \(.[1] | . + " " * (6 - length)) \(.[2])  \(.[3])  \(.[4])  \(.[5])  \(.[6])  \(.[7])  \(.[8])  \(.[9])"'
  done
done
printf '%s\n' "${rows[@]}" | jq -s --argjson factor "$factor" --arg threads "$threads" \
  '{factor: $factor, threads: $threads, runs: .}' > "$out/racing.json"
echo "wrote $out/racing.json"
