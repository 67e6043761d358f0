#!/usr/bin/env bash
# bench_goals.sh - bench/run-goals.sh (make bench's goals table) run small:
# one round, 2,000 records, 4,000 operations a YCSB run, a 64 MiB
# parameter-server warm-up.  Every goal has its row, every row but the
# guest's verbs one has figures (a ratio "min / median / max" of numbers,
# and a verdict), so a change of any tool's output that the table reads
# shows here rather than as an empty cell in the next make bench.  Figures
# are not judged.  TAP output.  Usage: bench_goals.sh BUILD_DIR
set -u
unset RKV_LOG_LEVEL
O=${1:-build}
n=0; fails=0
ok() { n=$((n+1)); if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; fails=$((fails+1)); fi; }
command -v redis-server >/dev/null ||
  { echo "1..0 # SKIP redis-server is not installed (make deps)"; exit 0; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

GOALS_RESULTS=$tmp GOALS_ROUNDS=1 GOALS_RECORDS=2000 GOALS_OPS=4000 \
  GOALS_IDLE_SECONDS=1 GOALS_PS_WARM=64M \
  timeout -k 5 280 bash bench/run-goals.sh "$O" >"$tmp/out" 2>&1
rc=$?
ok "$rc" "run-goals.sh ran (exit $rc)"
md=$(ls "$tmp"/goals-*.md 2>/dev/null | head -1)
ok "$([ -s "$md" ]; echo $?)" "it wrote its table in GOALS_RESULTS"
[ -s "$md" ] || { sed 's/^/# /' "$tmp/out"; echo "1..$n"; exit 1; }

rows=$(grep -c '^| [a-zA-Z]' "$md")
# the header row starts "| goal |"
ok "$([ "$rows" = 16 ]; echo $?)" "15 goal rows (found $((rows - 1)))"
bad=$(awk -F' [|] ' '/^\| [a-z]/ && !/^\| goal / && !/verbs/ {
  if ($4 !~ /^[0-9.]+ \/ [0-9.]+ \/ [0-9.]+$/ || $6 !~ /^(met|missed|met in the best rounds) \|$/)
    print }' "$md")
ok "$([ -z "$bad" ]; echo $?)" "every row but verbs has its ratio and a verdict"
[ -z "$bad" ] || printf '# %s\n' "$bad"
bad=$(awk -F' [|] ' '/^\| (rkv|idle|tcp|shm)/ {
  if ($2 !~ /^[0-9.]+ \/ [0-9.]+ \/ [0-9.]+$/ || $3 !~ /^[0-9.]+$/) print }' "$md")
ok "$([ -z "$bad" ]; echo $?)" "every rkv-against-a-peer row has both figures"
[ -z "$bad" ] || printf '# %s\n' "$bad"
grep -q '^| verbs cached get' "$md"
ok $? "the verbs row is there (figures or why not)"
[ "$fails" = 0 ] || sed 's/^/# /' "$md"
echo "1..$n"
[ "$fails" = 0 ]
