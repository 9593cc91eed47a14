#!/usr/bin/env bash
# bench/namespace.sh — the core as its namespace grows, for
# docs/PERFORMANCE.md: its memory and the migration policy's pass while 64
# clients create FILES empty files (corebench md), measured at each of
# MARKS entries.
#
# Memory: the server's resident set size (RSS) with the inode cache at its
# default cap, and, as the baseline in the same run, with a cap above FILES
# (what an unbounded cache would hold) up to BASE_FILES (FILES/2: past the
# default cap, where the two part); the cache's entries and the stat hit
# rate from /metrics. In the default run the creates of the step to the
# second mark (past the cap) are followed by stats of the same files (hits
# or misses of the capped cache), so the steps after it carry the heap the
# stats grew as well.
#
# The policy: 1,000 files of a tape class are put and migrated first (in
# both runs); at each mark of the default run a pass that finds nothing
# to do (`strata migrate`, no names) is timed 5 times, and so is the
# baseline on the same catalog: the candidate query in the form it had
# before the inodes_bitfile index (a join SQLite ran by scanning every
# inode), with sqlite3 on the live database.
#
#   bench/namespace.sh                                # 2,000,000 files
#   FILES=500000 MARKS="100000 500000" bench/namespace.sh
#
# The runs are kept in bench/results/namespace.json.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
bench_setup corebench
FILES=${FILES:-2000000}
MARKS=${MARKS:-"100000 500000 1000000 1500000 $FILES"}
BASE_FILES=${BASE_FILES:-$((FILES / 2))}
statmark=$(echo "$MARKS" | awk '{print $2}')
command -v sqlite3 >/dev/null || { apt-get update -qq && apt-get install -y -qq sqlite3 >/dev/null; }
PORT=7475
. bench/server.sh
DATA=$SCRATCH/namespace-data
trap 'stop; rm -rf "$DATA" "$SCRATCH/namespace-src"' EXIT
export STRATA_SERVER=127.0.0.1:$PORT

config() { # cache-entries (0: default)
  local f=$OUT/namespace.toml
  { echo "listen = \"127.0.0.1:$PORT\""; echo "data_dir = \"$DATA\""
    echo "[catalog]"; echo "cache_entries = $1"
    echo "[mover]"; echo "listen = \"127.0.0.1:$((PORT+1))\""
    echo "[library]"; echo 'time_scale = "instant"'
    echo "[hsm]"; echo 'migrate_every = "1h"'; } > "$f"; echo "$f"
}
rss() { awk '/^VmRSS/{print int($2/1024)}' "/proc/$1/status"; } # MiB
metric() { curl -s "http://127.0.0.1:$PORT/metrics" | awk -v m="$1" '$1==m{print $2}'; }
ms() { python3 -c "print(round(($2-$1)*1000, 1))"; }
median1() { python3 -c "import sys,statistics; print(statistics.median(float(x) for x in sys.argv[1:]))" "$@"; }
# The candidate query before the index, as the catalog ran it (one page).
OLDQ="SELECT i.id, b.id FROM bitfiles b JOIN inodes i ON i.bitfile = b.id WHERE b.state = 1 AND b.tapes < 1 AND b.on_disk = 1 AND b.id > 0 AND i.mtime < $(date +%s)000000000 AND i.cos IN ('default') ORDER BY b.id LIMIT 1000"
mkdir -p "$SCRATCH/namespace-src"
for i in $(seq 1000); do head -c 4096 /dev/urandom > "$SCRATCH/namespace-src/f$i"; done

echo "# bench/namespace.sh report — $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) CPUs, $(free -g | awk '/Mem/{print $2}') GiB, $(uname -r)"
J=(); declare -A ROW POL
for cap in 0 $((FILES * 2)); do
  rm -rf "$DATA"; start "$(config "$cap")"
  # Both runs start alike: the tape class's 1,000 files on tape.
  "$S" mkdir /tape; "$S" put "$SCRATCH/namespace-src"/* /tape/ > /dev/null; "$S" migrate > /dev/null
  have=1002 # with /tape and the root
  marks=("$(rss "$SERVER_PID")"); rates=(); pol=()
  for n in $MARKS; do
    if [ "$cap" != 0 ] && [ "$n" -gt "$BASE_FILES" ]; then marks+=("—"); continue; fi
    phases=create; [ "$cap" = 0 ] && [ "$n" = "$statmark" ] && phases=create,stat
    if [ "$n" -gt "$have" ]; then
      j=$("$OUT/corebench" md --server "127.0.0.1:$PORT" --clients 64 --files $(( (n - have + 63) / 64 )) --phases $phases)
      rates+=("$(echo "$j" | python3 -c 'import json,sys;print(json.load(sys.stdin)["create_per_s"])')")
      have=$n
    fi
    marks+=("$(rss "$SERVER_PID")")
    [ "$cap" = 0 ] || continue
    p=(); q=()
    for r in 1 2 3 4 5; do
      t0=$(now); out=$("$S" migrate); t1=$(now); p+=("$(ms "$t0" "$t1")")
      [[ $out == "migrated 0 files"* ]] || { echo "a pass found work: $out"; exit 1; }
      t0=$(now); sqlite3 -readonly "$DATA/catalog.db" "$OLDQ" > /dev/null; t1=$(now); q+=("$(ms "$t0" "$t1")")
    done
    POL[pass]+="| $(median1 "${p[@]}") "; POL[old]+="| $(median1 "${q[@]}") "
    pol+=("{\"entries\": $n, \"pass_ms\": [$(IFS=,; echo "${p[*]}")], \"old_query_ms\": [$(IFS=,; echo "${q[*]}")]}")
  done
  n=$(metric strata_catalog_cache_entries)
  hits=$(metric 'strata_catalog_cache_lookups_total{result="hit"}'); misses=$(metric 'strata_catalog_cache_lookups_total{result="miss"}')
  hr="—"; [ "$cap" = 0 ] && hr=$(python3 -c "print(f'{$hits/max($hits+$misses,1):.2f}')")
  name="$cap (above the file count)"; [ "$cap" = 0 ] && name="default (262,144)"
  ROW[$cap]="| $name | $(printf '%s | ' "${marks[@]}")$(printf '%.0f' "$n") | $hr | $(median "${rates[@]}") |"
  J+=("$(python3 -c "import json,sys; print(json.dumps({'cache_entries': $cap, 'marks': [int(x) for x in sys.argv[6].split()], 'rss_mib': [int(x) if x != '—' else None for x in sys.argv[1].split()], 'entries': int(float(sys.argv[2])), 'hits': int(float(sys.argv[3])), 'misses': int(float(sys.argv[4])), 'creates_per_s': [int(x) for x in sys.argv[5].split()], 'policy': [json.loads(p) for p in sys.argv[7:]]}))" "${marks[*]}" "$n" "$hits" "$misses" "${rates[*]}" "$MARKS" "${pol[@]}")")
  stop
done
hdr="| namespace entries | start |"; sep="|---|---|"
for n in $MARKS; do hdr+=" $n |"; sep+="---|"; done
echo
echo "Server RSS (MiB) while 64 clients create $FILES empty files (the baseline $BASE_FILES):"
echo
echo "| inode cache cap${hdr#| namespace entries} cache entries at the end | stat hit rate (the files of the step to $statmark) | creates/s |"
echo "${sep}---|---|---|"
echo "${ROW[0]}"; echo "${ROW[$((FILES * 2))]}"
echo
echo "A migration pass with nothing to do (1,000 files of the tape class, all on tape; the rest empty files), median of 5, ms:"
echo
echo "${hdr/ start |/}"; echo "${sep%---|}"
echo "| strata migrate (no-op pass, through the API) ${POL[pass]}|"
echo "| the candidate query before the index (sqlite3) ${POL[old]}|"
echo
echo "A pass is timed end to end (the CLI's process, the request, the candidate query per tape class, the answer)."
printf '%s\n' "${J[@]}" | save_results namespace files=$FILES
