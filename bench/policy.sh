#!/usr/bin/env bash
# bench/policy.sh — the cost of a migration policy pass as the namespace
# grows, for docs/PERFORMANCE.md. 1,000 files of a tape class are put and
# migrated; then empty files are created (corebench md) until the namespace
# holds each of SIZES entries, and at each size a pass that finds nothing
# to do (`strata migrate`, no names) is timed, 5 times. The baseline, in
# the same run on the same catalog: the candidate query in the form it had
# before the inodes_bitfile index (a join that SQLite ran by scanning every
# inode), timed with sqlite3 on the live database.
#
#   bench/policy.sh                          # 100k, 500k, 1M, 2M entries
#   SIZES="100000 200000" bench/policy.sh
#
# The runs are kept in bench/results/policy.json.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
bench_setup corebench
SIZES=${SIZES:-"100000 500000 1000000 2000000"}
command -v sqlite3 >/dev/null || { apt-get update -qq && apt-get install -y -qq sqlite3 >/dev/null; }
PORT=7477
. bench/server.sh
DATA=$SCRATCH/policy-data
trap 'stop; rm -rf "$DATA" "$SCRATCH/policy-src"' EXIT
export STRATA_SERVER=127.0.0.1:$PORT
{ echo "listen = \"127.0.0.1:$PORT\""; echo "data_dir = \"$DATA\""
  echo "[mover]"; echo "listen = \"127.0.0.1:$((PORT+1))\""
  echo "[library]"; echo 'time_scale = "instant"'
  echo "[hsm]"; echo 'migrate_every = "1h"'; } > "$OUT/policy.toml"
rm -rf "$DATA"; start "$OUT/policy.toml"

ms() { python3 -c "print(round(($2-$1)*1000, 1))"; }
median1() { python3 -c "import sys,statistics; print(statistics.median(float(x) for x in sys.argv[1:]))" "$@"; }
# The query before the index, as the catalog ran it (one page).
OLDQ="SELECT i.id, b.id FROM bitfiles b JOIN inodes i ON i.bitfile = b.id WHERE b.state = 1 AND b.tapes < 1 AND b.on_disk = 1 AND b.id > 0 AND i.mtime < $(date +%s)000000000 AND i.cos IN ('default') ORDER BY b.id LIMIT 1000"

mkdir -p "$SCRATCH/policy-src"
for i in $(seq 1000); do head -c 4096 /dev/urandom > "$SCRATCH/policy-src/f$i"; done
"$S" mkdir /tape
"$S" put "$SCRATCH/policy-src"/* /tape/ >/dev/null
"$S" migrate > /dev/null

echo "# bench/policy.sh report — $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) CPUs, $(free -g | awk '/Mem/{print $2}') GiB, $(uname -r)"
echo
echo "A migration pass with nothing to do (1,000 files of the tape class, all on tape; the rest empty files), median of 5, ms:"
echo
echo "| namespace entries | strata migrate (no-op pass, through the API) | the candidate query before the index (sqlite3) |"
echo "|---|---|---|"
have=1002; J=()
for n in $SIZES; do
  if [ "$n" -gt "$have" ]; then
    "$OUT/corebench" md --server "127.0.0.1:$PORT" --clients 64 --files $(( (n - have + 63) / 64 )) --phases create > /dev/null
    have=$n
  fi
  p=(); q=()
  for r in 1 2 3 4 5; do
    t0=$(now); out=$("$S" migrate); t1=$(now); p+=("$(ms "$t0" "$t1")")
    [[ $out == "migrated 0 files"* ]] || { echo "a pass found work: $out"; exit 1; }
    t0=$(now); sqlite3 -readonly "$DATA/catalog.db" "$OLDQ" > /dev/null; t1=$(now); q+=("$(ms "$t0" "$t1")")
  done
  echo "| $n | $(median1 "${p[@]}") | $(median1 "${q[@]}") |"
  J+=("{\"entries\": $n, \"pass_ms\": [$(IFS=,; echo "${p[*]}")], \"old_query_ms\": [$(IFS=,; echo "${q[*]}")]}")
done
echo
echo "A pass is timed end to end (the CLI's process, the request, the candidate query per tape class, the answer)."
printf '%s\n' "${J[@]}" | save_results policy
