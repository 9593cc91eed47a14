#!/usr/bin/env bash
# bench/small.sh — small-file ingest for docs/PERFORMANCE.md: `strata put
# DIR/* /in/` of many small files against a plain durable copy of the same
# files on the same file system (corebench copy: read, create, write, fsync,
# one file at a time), alternating, in one run.
#
#   bench/small.sh                       # 2,000 × 64 KiB and 10,000 × 4 KiB
#   SETS="2000x64" REPS=5 SERIAL=1 bench/small.sh
#
# Strata runs as a new user starts it: the built-in configuration (four
# devices under its data directory, a SQLite catalog with full sync), on
# SCRATCH (default bench/out/scratch). Every run writes into directories of
# its own and nothing is removed until the end, and the script first waits
# a minute after a sync: on an ext4 without a journal (this machine's),
# creating files where thousands were just deleted costs several times the
# CPU (the inode allocator skips inodes freed in the last minute or more),
# which would fall on whichever side ran after a removal.
#
# Reported per set: files/s of the copy and of `strata put` (its default
# --parallel), the ratio, and the CPU per file of the server and the
# client; with SERIAL=1 also `strata put --parallel 1` (one file at a
# time). The runs are kept in bench/results/small.json.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
bench_setup corebench
REPS=${REPS:-3}
SETS=${SETS:-"2000x64 10000x4"}
PORT=7470
DEFAULT_PARALLEL=$("$S" put --help | sed -n 's/.*--parallel int.*(default \([0-9]*\)).*/\1/p')
. bench/server.sh
trap 'stop; rm -rf "$SCRATCH"/small-run-*' EXIT
export STRATA_SERVER=127.0.0.1:$PORT

config() { # data-dir
  local f=$OUT/small.toml
  { echo "listen = \"127.0.0.1:$PORT\""; echo "data_dir = \"$1\""
    echo "[mover]"; echo "listen = \"127.0.0.1:$((PORT+1))\""; } > "$f"; echo "$f"
}
# cpu PID: user+system CPU of a process so far, in clock ticks.
cpu() { awk '{print $14+$15}' "/proc/$1/stat"; }

sync; sleep "${QUIET:-65}"   # see above: inodes freed before this script are reusable again

echo "# bench/small.sh report — $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) CPUs, $(free -g | awk '/Mem/{print $2}') GiB, $(uname -r)"
echo "file system under test: $(df -T "$SCRATCH" | awk 'NR==2{print $2" on "$1}'), strata $("$S" --version | awk '{print $3}')"
echo
KINDS=(copy put); [ "${SERIAL:-0}" = 1 ] && KINDS+=(serial)
if [ ${#KINDS[@]} = 3 ]; then
  echo "| files | copy, write+fsync each (files/s) | strata put (files/s) | ratio | put --parallel 1 (files/s) | ratio | server CPU µs/file | client CPU µs/file |"
  echo "|---|---|---|---|---|---|---|---|"
else
  echo "| files | copy, write+fsync each (files/s) | strata put (files/s) | ratio | server CPU µs/file | client CPU µs/file |"
  echo "|---|---|---|---|---|---|"
fi
n=0; J=()
for set in $SETS; do
  count=${set%x*}; kib=${set#*x}
  src=$SCRATCH/small-src-$set
  if [ "$(ls "$src" 2>/dev/null | wc -l)" != "$count" ]; then
    rm -rf "$src"; mkdir -p "$src"
    python3 -c "
import os, sys
for i in range($count):
    with open(os.path.join(sys.argv[1], 'f%06d' % i), 'wb') as f: f.write(os.urandom($kib * 1024))" "$src"
  fi
  cat "$src"/* > /dev/null; sync
  cp=(); sp=(); s1=(); scpu=(); ccpu=()
  for r in $(seq "$REPS"); do
    for k in "${!KINDS[@]}"; do
      n=$((n + 1)); run=$SCRATCH/small-run-$n; sync; sleep 1
      kind=${KINDS[(r + k) % ${#KINDS[@]}]}
      case $kind in
      copy) cp+=("$("$OUT/corebench" copy "$src" "$run")") ;;
      *)
        par=$DEFAULT_PARALLEL; [ "$kind" = serial ] && par=1
        start "$(config "$run")"; "$S" mkdir /in; sync; sleep 1
        c0=$(cpu "$SERVER_PID"); t0=$(now)
        /usr/bin/time -f "%U %S" -o "$OUT/small.time" "$S" put --parallel $par "$src"/* /in/
        t1=$(now); c1=$(cpu "$SERVER_PID")
        got=$("$S" ls /in | wc -l); [ "$got" = "$count" ] || { echo "put stored $got of $count files"; exit 1; }
        stop
        if [ $par = 1 ]; then s1+=("$(ops "$count" "$t0" "$t1")"); else
          sp+=("$(ops "$count" "$t0" "$t1")")
          scpu+=("$(python3 -c "print(round(($c1-$c0)*10000/$count))")")
          ccpu+=("$(python3 -c "import sys; u,s=open(sys.argv[1]).read().split(); print(round((float(u)+float(s))*1e6/$count))" "$OUT/small.time")")
        fi ;;
      esac
    done
  done
  c=$(median "${cp[@]}"); p=$(median "${sp[@]}"); serial=""
  if [ ${#s1[@]} -gt 0 ]; then p1=$(median "${s1[@]}"); serial=" $p1 | $(ratio "$p1" "$c") |"; fi
  echo "| $count × $kib KiB | $c | $p | $(ratio "$p" "$c") |$serial $(median "${scpu[@]}") | $(median "${ccpu[@]}") |"
  echo "runs ($count × $kib KiB): copy ${cp[*]}; put ${sp[*]}${serial:+; put --parallel 1 ${s1[*]}}" >&2
  J+=("$(python3 -c "import json,sys; print(json.dumps({'set': sys.argv[1], 'files': $count, 'kib': $kib, 'copy_files_per_s': [int(x) for x in sys.argv[2].split()],
    'put_files_per_s': [int(x) for x in sys.argv[3].split()], 'put_parallel_1_files_per_s': [int(x) for x in sys.argv[4].split()],
    'server_cpu_us_per_file': [int(x) for x in sys.argv[5].split()], 'client_cpu_us_per_file': [int(x) for x in sys.argv[6].split()]}))" \
    "$set" "${cp[*]}" "${sp[*]}" "${s1[*]}" "${scpu[*]}" "${ccpu[*]}")")
done
printf '%s\n' "${J[@]}" | save_results small parallel=$DEFAULT_PARALLEL
