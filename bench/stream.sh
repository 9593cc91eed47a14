#!/usr/bin/env bash
# bench/stream.sh — one migration stream and one recall stream, for
# docs/PERFORMANCE.md: a SIZE_MB file, put as a new user puts it (the
# default class: 4 stripes of 4 MiB units), is migrated to an
# emulated LTO-9 library in instant time with its cartridges on tmpfs (so
# no drive and no cartridge file is the limit), purged, and recalled; each
# is timed from the command until the copy is recorded. The baselines in
# the same run are the two ends of a migration: the disk's pace reading the
# disk copy's files (dd with O_DIRECT, after the page cache is dropped) and
# tmpfs's pace taking a new file of the same size (dd from /dev/zero into
# the cartridges' directory: on this VM first writes to guest memory the
# host has reclaimed are slow, and vary); the goal is absolute, 800 MB/s
# (twice an LTO-9 drive's native rate).
#
#   bench/stream.sh                  # 2048 MiB, 3 runs; then real-time LTO-9 (~2 minutes in all)
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
trap 'stop; rm -rf "$DATA" "$TAPES"' EXIT
export STRATA_SERVER=127.0.0.1:$PORT
{ echo "listen = \"127.0.0.1:$PORT\""; echo "data_dir = \"$DATA\""
  echo "[mover]"; echo "listen = \"127.0.0.1:$((PORT+1))\""
  echo "[library]"; echo 'generation = "LTO-9"'; echo 'time_scale = "instant"'; echo "path = \"$TAPES\""; echo 'drives = 2'; echo 'cartridges = 4'
  echo "[hsm]"; echo 'migrate_every = "1h"'; echo 'purge_every = "1h"'; echo 'recall_min_files = 1'; } > "$OUT/stream.toml"
SRC=$SCRATCH/stream-src.dat
source_file "$SRC" $((SIZE_MB << 20))
BYTES=$((SIZE_MB << 20))
rm -rf "$DATA" "$TAPES"; start "$OUT/stream.toml"

residency() { "$S" stat --json "$1" | python3 -c 'import json,sys; print(json.load(sys.stdin).get("residency",""))'; }
mb() { rate "$BYTES" "$1" "$2"; }

echo "# bench/stream.sh report — $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) CPUs, $(free -g | awk '/Mem/{print $2}') GiB, $(uname -r)"
echo
dd_=(); shm=(); mig=(); rec=(); J=()
for r in $(seq "$REPS"); do
  "$S" put "$SRC" /f$r
  objs=$("$S" stat --json /f$r | python3 -c 'import json,sys; print(" ".join(s["object"] for s in json.load(sys.stdin)["layout"]["segments"]))')
  drop; t0=$(now)
  for o in $objs; do
    f=$(find "$DATA/devices" -name "$o")
    dd if="$f" of=/dev/null bs=4M iflag=direct status=none
  done
  t1=$(now); dd_+=("$(mb "$t0" "$t1")")
  t0=$(now); dd if=/dev/zero of="$TAPES/dd.$r" bs=4M count=$((SIZE_MB / 4)) status=none; t1=$(now); shm+=("$(mb "$t0" "$t1")")
  rm -f "$TAPES/dd.$r"
  drop; t0=$(now); "$S" migrate /f$r > /dev/null; t1=$(now); mig+=("$(mb "$t0" "$t1")")
  "$S" purge /f$r > /dev/null
  drop; t0=$(now); "$S" stage /f$r > /dev/null
  while [ "$(residency /f$r)" != "disk+tape" ]; do sleep 0.05; done
  t1=$(now); rec+=("$(mb "$t0" "$t1")")
  J+=("{\"dd_read_mb_s\": ${dd_[-1]}, \"tmpfs_write_mb_s\": ${shm[-1]}, \"migrate_mb_s\": ${mig[-1]}, \"recall_mb_s\": ${rec[-1]}}")
done
d=$(median "${dd_[@]}"); w=$(median "${shm[@]}"); m=$(median "${mig[@]}"); c=$(median "${rec[@]}")
lo=$(python3 -c "print(min($d, $w))")
echo "A ${SIZE_MB} MiB file of the default class (4 stripes), LTO-9 in instant time, cartridges on tmpfs (MB/s, median of $REPS):"
echo
echo "| stream | MB/s | against the slower end (disk read, tmpfs write) | against the goal (800 MB/s) |"
echo "|---|---|---|---|"
echo "| dd, the disk copy's files read with O_DIRECT | $d | | |"
echo "| dd, a new file of the same size into tmpfs | $w | | |"
echo "| migration (strata migrate, until recorded) | $m | $(ratio "$m" "$lo") | $(ratio "$m" 800) |"
echo "| recall (strata stage, until on disk) | $c | $(ratio "$c" "$d") (against the disk's read) | $(ratio "$c" 800) |"
echo
echo "runs: dd read ${dd_[*]}; tmpfs write ${shm[*]}; migrate ${mig[*]}; recall ${rec[*]}"
stop
rm -rf "$DATA" "$TAPES"

# A real-time LTO-9 (400 MB/s) with its cartridges on tmpfs: a migration of
# 2 and of 4 GiB against the drive, and tmpfs's own pace for new pages one
# GiB after another (on this VM it falls after the first two or three: the
# host backs guest memory on first touch, and takes back what the guest
# frees). hsmbench --prefault writes and removes a file of the migration's
# size among the cartridges just before each timed run, so the run's tmpfs
# pages are ones the host has backed and the drive, not the stand-in for
# its tape, is what the run meets.
echo
echo "### Real-time LTO-9, cartridges on tmpfs (go run ./bench/hsmbench --gen LTO-9 --parts large --prefault --gib 2,4)"
echo
shmg=()
for g in 0 1 2 3; do
  t0=$(now); dd if=/dev/zero of="$TAPES.dd" bs=4M count=256 seek=$((g * 256)) conv=notrunc status=none; t1=$(now)
  shmg+=("$(rate $((1 << 30)) "$t0" "$t1")")
done
rm -f "$TAPES.dd"
echo "tmpfs, a new 4 GiB file written one GiB after another (dd): ${shmg[*]} MB/s"
echo
echo "| run | drives | files | bytes | wall s | MB/s | model bound MB/s | ratio | ratio without positioning |"
echo "|---|---|---|---|---|---|---|---|---|"
rt=()
# One server, one mount: a 2 GiB migration, then a 4 GiB one.
while read -r row; do
  echo "$row"
  rt+=("{\"realtime_gib\": $(echo "$row" | awk -F'|' '{print int($5 / 2^30)}'), \"ratio\": $(echo "$row" | awk -F'|' '{print $9}'), \"ratio_without_positioning\": $(echo "$row" | awk -F'|' '{print $10}')}")
done < <(go run ./bench/hsmbench --data "$SCRATCH" --tapes "$TAPES" --gen LTO-9 --parts large --prefault --gib 2,4 | tail -n 2)
printf '%s\n' "${J[@]}" "${rt[@]}" | save_results stream size_mb=$SIZE_MB "tmpfs_gib_mb_s=[$(IFS=,; echo "${shmg[*]}")]"
