#!/usr/bin/env bash
# bench/catalog.sh — the same metadata operations through the real API with
# the embedded SQLite catalog and with a PostgreSQL catalog, for
# docs/PERFORMANCE.md ("The PostgreSQL catalog").
#
#   bench/catalog.sh            # REPS=3 rounds, the two catalogs alternating
#
# Both are durable: SQLite fsyncs its WAL per group commit (sync = "full"),
# PostgreSQL flushes its WAL per commit (fsync and synchronous_commit on, its
# defaults). PostgreSQL is a throwaway cluster of the machine's Debian
# package, its data on the same file system as the SQLite file, reached
# over its Unix socket as a server on the same host would. Each round
# starts a fresh server on an empty catalog; creates, stats and removes come
# from `corebench md` (8 clients on the core's Unix socket, then 1), which
# also reads every process's CPU from /proc (--server-pid: Strata; the
# machine's total includes PostgreSQL's).
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
bench_setup corebench
REPS=${REPS:-3}
FILES=${FILES:-6000}
PORT=7450

. bench/pg.sh
. bench/server.sh
trap 'stop; pg_stop' EXIT

config() { # catalog-table
  local f=$OUT/catalog-bench.toml
  { echo "listen = \"127.0.0.1:$PORT\""; echo "data_dir = \"$SCRATCH/data\""
    echo "[mover]"; echo "listen = \"127.0.0.1:$((PORT+1))\""
    echo "[[device]]"; echo 'id = "d0"'
    echo "[[cos]]"; echo 'name = "default"'; echo 'pool = "disk"'; echo "stripe_width = 1"; echo 'stripe_unit = "4MiB"'
    echo "$1"
  } > "$f"; echo "$f"
}

echo "# bench/catalog.sh report — $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) CPUs, $(uname -r), PostgreSQL $("$PGBIN/postgres" --version | awk '{print $3}')"
echo
echo "| catalog | round | clients | create/s | stat/s | remove/s | create µs CPU: strata | machine | idle |"
echo "|---|---|---|---|---|---|---|---|---|"
for r in $(seq "$REPS"); do
  for cat in sqlite postgres; do
    rm -rf "$SCRATCH/data"
    if [ $cat = postgres ]; then
      pg_start
      start "$(config "$(printf '[catalog]\ndriver = "postgres"\ndsn = "%s"' "$PGDSN")")"
    else
      start "$(config "")"
    fi
    # A first round fills the catalog's files (a fresh WAL pays for growing).
    "$OUT/corebench" md --server 127.0.0.1:$PORT --clients 8 --files 3000 --phases create >/dev/null
    for c in 8 1; do
      j=$("$OUT/corebench" md --server 127.0.0.1:$PORT --clients $c --files $((c == 8 ? FILES : FILES / 2)) --server-pid "$SERVER_PID")
      echo "$j" | python3 -c '
import json, sys
r = json.load(sys.stdin); c = r["create_cpu_us"]
print("| %s | %s | %d | %d | %d | %d | %.0f | %.0f | %.0f |" % (sys.argv[1], sys.argv[2], r["clients"], r["create_per_s"], r["stat_per_s"], r["remove_per_s"], c["server"], c["machine"], c["idle"]))' $cat "$r"
    done
    stop
    [ $cat = postgres ] && pg_stop
  done
done
