#!/usr/bin/env bash
# bench/cache.sh — the core's memory under many creates, for
# docs/PERFORMANCE.md: the server's resident set size (RSS) sampled while
# 64 clients create FILES empty files (corebench md, create phase), with the
# inode cache at its default cap and, as the baseline in the same run, with
# a cap above FILES (what an unbounded cache would hold).
#
#   bench/cache.sh                  # 2,000,000 files
#   FILES=500000 bench/cache.sh
#
# Reported: RSS after each quarter of the creates, the cache's entries and
# its hit rate from /metrics. The runs are kept in bench/results/cache.json.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
bench_setup corebench
FILES=${FILES:-2000000}
PORT=7475
. bench/server.sh
trap 'stop; rm -rf "$SCRATCH/cache-data"' EXIT
export STRATA_SERVER=127.0.0.1:$PORT

config() { # cache-entries (0: default)
  local f=$OUT/cache.toml
  { echo "listen = \"127.0.0.1:$PORT\""; echo "data_dir = \"$SCRATCH/cache-data\""
    echo "[catalog]"; echo "cache_entries = $1"
    echo "[mover]"; echo "listen = \"127.0.0.1:$((PORT+1))\""; } > "$f"; echo "$f"
}
rss() { awk '/^VmRSS/{print int($2/1024)}' "/proc/$1/status"; } # MiB
metric() { curl -s "http://127.0.0.1:$PORT/metrics" | awk -v m="$1" '$1==m{print $2}'; }

echo "# bench/cache.sh report — $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) CPUs, $(free -g | awk '/Mem/{print $2}') GiB, $(uname -r)"
echo
echo "Server RSS (MiB) while 64 clients create $FILES empty files, after each quarter:"
echo
echo "| inode cache cap | 0 | 25 % | 50 % | 75 % | 100 % | cache entries at the end | hit rate | creates/s |"
echo "|---|---|---|---|---|---|---|---|---|"
J=()
for cap in 0 $((FILES * 2)); do
  rm -rf "$SCRATCH/cache-data"; start "$(config "$cap")"
  per=$((FILES / 64 / 4))
  marks=("$(rss "$SERVER_PID")"); rates=()
  for q in 1 2 3 4; do
    j=$("$OUT/corebench" md --server "127.0.0.1:$PORT" --clients 64 --files "$per" --phases create,stat)
    rates+=("$(echo "$j" | python3 -c 'import json,sys;print(json.load(sys.stdin)["create_per_s"])')")
    marks+=("$(rss "$SERVER_PID")")
  done
  n=$(metric strata_catalog_cache_entries)
  hits=$(metric 'strata_catalog_cache_lookups_total{result="hit"}'); misses=$(metric 'strata_catalog_cache_lookups_total{result="miss"}')
  hr=$(python3 -c "print(f'{$hits/max($hits+$misses,1):.2f}')")
  name="$cap (above the file count)"; [ "$cap" = 0 ] && name="default (262,144)"
  echo "| $name | ${marks[0]} | ${marks[1]} | ${marks[2]} | ${marks[3]} | ${marks[4]} | $(printf '%.0f' "$n") | $hr | $(median "${rates[@]}") |"
  J+=("$(python3 -c "import json,sys; print(json.dumps({'cache_entries': $cap, 'rss_mib': [int(x) for x in sys.argv[1].split()], 'entries': int(float(sys.argv[2])), 'hits': int(float(sys.argv[3])), 'misses': int(float(sys.argv[4])), 'creates_per_s': [int(x) for x in sys.argv[5].split()]}))" "${marks[*]}" "$n" "$hits" "$misses" "${rates[*]}")")
  stop
done
echo
echo "Each quarter is one corebench md run (creates, then stats of the same files, which hit or miss the cache)."
printf '%s\n' "${J[@]}" | save_results cache files=$FILES
