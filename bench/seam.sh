#!/usr/bin/env bash
# bench/seam.sh — what the devices' file-operations seam (internal/fsio)
# costs, for docs/PERFORMANCE.md: put and get through the build before it
# (BEFORE, a git revision) against this tree's, servers taking turns on
# the same disk, fresh each round.
#
#   BEFORE=db7c0b2 bench/seam.sh
#   REPS=5 SIZE_MB=2048 FILES=1000 BEFORE=db7c0b2 bench/seam.sh
#
# Each round and build: a SIZE_MB put (the mover reads the file handed
# over: O_DIRECT writes, fallocate, fsync), put --no-handover (streamed
# through the mover's socket), get (the object's file handed over) and get
# --no-handover (sendfile from the object's file), all after the page
# cache is dropped; then a put of FILES × 64 KiB files (small objects:
# page-cache writes, group syncfs).
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
bench_setup
REPS=${REPS:-3}
SIZE_MB=${SIZE_MB:-2048}
FILES=${FILES:-1000}
BEFORE=${BEFORE:?set BEFORE to the revision before the seam}
PORT=7490
. bench/server.sh
trap 'stop; rm -rf "$SCRATCH"/seam-*' EXIT
export STRATA_SERVER=127.0.0.1:$PORT

rm -rf "$OUT/before"; git worktree add -q --detach "$OUT/before" "$BEFORE" 2>/dev/null || git -C "$OUT/before" checkout -q "$BEFORE"
(cd "$OUT/before" && go build -o "$OUT/strata-before" ./cmd/strata)
git worktree remove --force "$OUT/before"
AFTER=$OUT/strata

src=$SCRATCH/seam-src.dat; source_file "$src" $((SIZE_MB << 20))
small=$SCRATCH/seam-small
if [ "$(ls "$small" 2>/dev/null | wc -l)" != "$FILES" ]; then
  rm -rf "$small"; mkdir -p "$small"
  python3 -c "
import os, sys
for i in range($FILES):
    open(os.path.join(sys.argv[1], 'f%06d' % i), 'wb').write(os.urandom(65536))" "$small"
fi
config() { # data-dir
  local f=$OUT/seam.toml
  { echo "listen = \"127.0.0.1:$PORT\""; echo "data_dir = \"$1\""
    echo "[mover]"; echo "listen = \"127.0.0.1:$((PORT+1))\""; echo "[library]"; echo "drives = 0"; } > "$f"; echo "$f"
}
b=$((SIZE_MB << 20))
declare -A R
OPS="put put_stream get get_stream small"
for r in $(seq "$REPS"); do
  builds="before after"; [ $((r % 2)) = 0 ] && builds="after before"
  for build in $builds; do
    S=$AFTER; [ $build = before ] && S=$OUT/strata-before
    d=$SCRATCH/seam-data-$build-$r; start "$(config "$d")"
    drop; cat "$src" > /dev/null
    t0=$(now); "$S" put "$src" /a; t1=$(now); R[$build,put]+="$(rate $b "$t0" "$t1") "
    drop; cat "$src" > /dev/null
    t0=$(now); "$S" put --no-handover "$src" /b; t1=$(now); R[$build,put_stream]+="$(rate $b "$t0" "$t1") "
    drop; t0=$(now); "$S" get /a - > /dev/null; t1=$(now); R[$build,get]+="$(rate $b "$t0" "$t1") "
    drop; t0=$(now); "$S" get --no-handover /b - > /dev/null; t1=$(now); R[$build,get_stream]+="$(rate $b "$t0" "$t1") "
    "$S" mkdir /in; sync; sleep 1
    t0=$(now); "$S" put "$small"/* /in/; t1=$(now); R[$build,small]+="$(ops "$FILES" "$t0" "$t1") "
    stop
  done
done

echo "# bench/seam.sh report — $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) CPUs, $(uname -r); before $BEFORE, after $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . ':!bench' || echo +)"
echo
echo "| operation | before | after | after / before | runs before | runs after |"
echo "|---|---|---|---|---|---|"
for op in $OPS; do
  bm=$(median ${R[before,$op]}); am=$(median ${R[after,$op]})
  unit="MB/s"; [ $op = small ] && unit="files/s"
  echo "| $op ($unit) | $bm | $am | $(ratio "$am" "$bm") | ${R[before,$op]}| ${R[after,$op]}|"
done
for op in $OPS; do
  for build in before after; do
    echo "{\"op\": \"$op\", \"build\": \"$build\", \"runs\": [$(echo ${R[$build,$op]} | tr ' ' ',')]}"
  done
done | save_results seam before="\"$BEFORE\""
