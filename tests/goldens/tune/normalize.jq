# Normalizes a `tune --json` report for the goldens (tests/tune_goldens.sh): what differs
# between two runs of the same scripted tune goes, what the pipeline decided stays.
# - wall-clock times (the pipeline's own clock, not the scripted timings) become "<time>"
#   (null stays null): time_s, search_s, read_s, cached_call_s, abandoned_s, seconds, *_seconds,
#   the economy's stage times and break_even_calls (total time over a scripted gain);
# - the calls budget's figures that depend on the time already spent (left_s, search_s,
#   candidates, the numbers in its reason);
# - paths become their file names (also in the ranking model's record and note); the tuning
#   cache's entry name, date and machine go; the
#   context block (machine, build, date) and the memory record (resident sizes) go;
# - the last-level cache's size in the narrow-indices pass's note and facts (this machine's)
#   becomes "<llc>";
# - other non-integer numbers are rounded to 9 significant digits, so that a last-bit
#   difference (e.g. a fused multiply-add on another CPU) does not fail a golden.
def time_key: test("^(time_s|search_s|read_s|cached_call_s|abandoned_s|seconds|choice_s|measure_s|confirm_s|decide_s|total_s|break_even_calls)$") or test("_seconds$");
def path_key: test("^(file|db|decided_for_file|output|model|index)$");
def blank: if . == null then null else "<time>" end;
def basename: if type == "string" then sub("^.*/"; "") else . end;
def sig: if type == "number" and . != floor and . != 0 then
           (pow(10; (fabs | log10 | floor) - 8)) as $u | ((. / $u) | round) * $u
         else . end;
def walk_keys: if type == "object" then
                 with_entries(if (.key | time_key) then .value |= blank
                              elif (.key | path_key) then .value |= basename
                              else .value |= walk_keys end)
               elif type == "array" then map(walk_keys)
               else sig end;
del(.context, .memory)
| if .plan_cache | type == "object" then
    .plan_cache |= (if has("path") then .path = "<entry>" else . end
                    | if has("saved_at") then .saved_at = "<date>" else . end
                    | if .key | type == "object" then .key |= del(.machine) else . end)
  else . end
| if .economy.calls_budget | type == "object" then
    .economy.calls_budget |= (.left_s |= blank | .search_s |= blank | .candidates |= blank
                              | if .reason | type == "string"
                                then .reason |= gsub("[0-9][0-9.e+-]* s"; "<t> s") else . end)
  else . end
| if .model | type == "object" then
    .model |= (.path |= basename | if .note | type == "string" then .note |= gsub("/[^ ]*/"; "") else . end)
  else . end
| walk(if type == "string" then gsub("last-level cache \\([0-9.]+ MiB\\)"; "last-level cache (<llc>)") else . end)
| walk_keys
