#!/usr/bin/env bash
# bench/stream.sh — one migration stream and one recall stream, for
# docs/PERFORMANCE.md: a SIZE_MB file of one stripe is migrated to an
# emulated LTO-9 library in instant time with its cartridges on tmpfs (so
# no drive and no cartridge file is the limit), purged, and recalled; each
# is timed from the command until the copy is recorded. The baseline in the
# same run is the machine's own copy of the same bytes from the disk copy's
# file to tmpfs (dd, after the page cache is dropped), the least a stream
# must do.
#
#   bench/stream.sh                  # 2048 MiB, 3 runs
#   SIZE_MB=4096 REPS=1 bench/stream.sh
#
# The runs are kept in bench/results/stream.json.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
bench_setup
REPS=${REPS:-3}
SIZE_MB=${SIZE_MB:-2048}
PORT=7479
. bench/server.sh
DATA=$SCRATCH/stream-data
TAPES=/dev/shm/strata-stream-tapes
trap 'stop; rm -rf "$DATA" "$TAPES" /dev/shm/strata-stream-dd' EXIT
export STRATA_SERVER=127.0.0.1:$PORT
{ echo "listen = \"127.0.0.1:$PORT\""; echo "data_dir = \"$DATA\""
  echo "[mover]"; echo "listen = \"127.0.0.1:$((PORT+1))\""
  echo "[library]"; echo 'generation = "LTO-9"'; echo 'time_scale = "instant"'; echo "path = \"$TAPES\""; echo 'drives = 2'; echo 'cartridges = 4'
  echo "[hsm]"; echo 'migrate_every = "1h"'; echo 'purge_every = "1h"'; echo 'recall_min_files = 1'
  echo "[[cos]]"; echo 'name = "default"'; echo 'pool = "disk"'; echo 'stripe_width = 1'; echo 'stripe_unit = "4MiB"'; echo 'tape_copies = 1'; } > "$OUT/stream.toml"
SRC=$SCRATCH/stream-src.dat
source_file "$SRC" $((SIZE_MB << 20))
BYTES=$((SIZE_MB << 20))
rm -rf "$DATA" "$TAPES"; start "$OUT/stream.toml"

residency() { "$S" stat --json "$1" | python3 -c 'import json,sys; print(json.load(sys.stdin).get("residency",""))'; }
mb() { rate "$BYTES" "$1" "$2"; }

echo "# bench/stream.sh report — $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) CPUs, $(free -g | awk '/Mem/{print $2}') GiB, $(uname -r)"
echo
dd_=(); mig=(); rec=(); J=()
for r in $(seq "$REPS"); do
  "$S" put "$SRC" /f$r
  obj=$("$S" stat --json /f$r | python3 -c 'import json,sys; print(json.load(sys.stdin)["layout"]["segments"][0]["object"])')
  obj=$(find "$DATA/devices" -name "$obj")
  drop; t0=$(now); dd if="$obj" of=/dev/shm/strata-stream-dd bs=4M count=$((SIZE_MB / 4)) status=none; t1=$(now); dd_+=("$(mb "$t0" "$t1")")
  rm -f /dev/shm/strata-stream-dd
  drop; t0=$(now); "$S" migrate /f$r > /dev/null; t1=$(now); mig+=("$(mb "$t0" "$t1")")
  "$S" purge /f$r > /dev/null
  drop; t0=$(now); "$S" stage /f$r > /dev/null
  while [ "$(residency /f$r)" != "disk+tape" ]; do sleep 0.05; done
  t1=$(now); rec+=("$(mb "$t0" "$t1")")
  J+=("{\"dd_to_tmpfs_mb_s\": ${dd_[-1]}, \"migrate_mb_s\": ${mig[-1]}, \"recall_mb_s\": ${rec[-1]}}")
done
d=$(median "${dd_[@]}"); m=$(median "${mig[@]}"); c=$(median "${rec[@]}")
echo "A ${SIZE_MB} MiB file, one stripe, LTO-9 in instant time, cartridges on tmpfs (MB/s, median of $REPS):"
echo
echo "| stream | MB/s | against the copy (dd, disk copy to tmpfs, cold) | against the goal (800 MB/s) |"
echo "|---|---|---|---|"
echo "| dd, the disk copy's file to tmpfs | $d | 1 | |"
echo "| migration (strata migrate, until recorded) | $m | $(ratio "$m" "$d") | $(ratio "$m" 800) |"
echo "| recall (strata stage, until on disk) | $c | $(ratio "$c" "$d") | $(ratio "$c" 800) |"
echo
echo "runs: dd ${dd_[*]}; migrate ${mig[*]}; recall ${rec[*]}"
printf '%s\n' "${J[@]}" | save_results stream size_mb=$SIZE_MB
