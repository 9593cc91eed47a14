#!/usr/bin/env bash
# bench/mount.sh — the POSIX mount against the API it is built on, for
# docs/POSIX.md ("Performance") and docs/PERFORMANCE.md ("Front ends").
#
#   bench/mount.sh               # both parts; prints a Markdown report
#   PARTS=md bench/mount.sh      # only some of: seq md
#
# seq: a SIZE_MB file written with dd (bs=4M) into `strata mount` and
#      read back with dd after the page cache is dropped, against
#      `strata put` and `strata get` of the same file (which on the
#      server's host pass the file itself between client and mover), and
#      against the same with --no-handover (the bytes streamed through the
#      movers' sockets, as the mount sends them), taking turns; and the
#      disk's own pace (dd with an fsync, dd reading), for scale. In the
#      same turns the file goes through `strata nfs` (written and read by
#      bench/nfsbench, 1 MiB calls, as this kernel has no NFS client);
#      its write is timed to the last WRITE answered and to the file
#      stored on the server.
#      BEFORE=REV adds, in the same turns, the same dd through a second
#      mount run by the build of REV (against the same server): the
#      mount's own change, measured.
# md:  creates and stats of FILES empty files by one client, through the
#      mount (corebench md --posix on the mount point) and through the API
#      (corebench md --server), and `ls -l` of that directory through the
#      mount against `strata ls -l`.
# Runs as root (to drop caches). Needs fuse3 and 3×SIZE_MB free under
# SCRATCH.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
bench_setup corebench nfsbench
REPS=${REPS:-3}
PARTS=${PARTS:-"seq md"}
SIZE_MB=${SIZE_MB:-4096}
FILES=${FILES:-10000}
PORT=7450
. bench/server.sh
MNT=$SCRATCH/mnt
MOUNT_PID=
# mount_ [BINARY DIR]: strata mount (this build's, at MNT unless named).
mount_() { local bin=${1:-$S} mnt=${2:-$MNT}; mkdir -p "$mnt"; "$bin" mount "$mnt" > "$OUT/mount$(basename "$mnt").log" 2>&1 & MOUNT_PID="$MOUNT_PID $!"
  for _ in $(seq 100); do grep -q " $mnt " /proc/self/mountinfo && return; sleep 0.05; done; echo "mount failed"; cat "$OUT/mount$(basename "$mnt").log"; exit 1; }
umount_() { local p; for p in $MOUNT_PID; do kill -INT "$p" && wait "$p" 2>/dev/null || true; done; MOUNT_PID=; }
BEFORE=${BEFORE:-}
MNT_B=$SCRATCH/mnt-before
if [ -n "$BEFORE" ]; then
  rm -rf "$OUT/before"; git worktree add -q --detach "$OUT/before" "$BEFORE" 2>/dev/null || git -C "$OUT/before" checkout -q "$BEFORE"
  (cd "$OUT/before" && go build -o "$OUT/strata-before" ./cmd/strata)
  git worktree remove --force "$OUT/before"
fi
NFS_PORT=$((PORT+5))
NFS_PID=
nfs_() { "$S" nfs --admin --listen 127.0.0.1:$NFS_PORT --write-idle 200ms > "$OUT/nfs.log" 2>&1 & NFS_PID=$!
  for _ in $(seq 100); do grep -q "serving on" "$OUT/nfs.log" && return; sleep 0.05; done; echo "strata nfs failed"; cat "$OUT/nfs.log"; exit 1; }
unfs_() { [ -n "$NFS_PID" ] && kill -INT "$NFS_PID" && wait "$NFS_PID" 2>/dev/null || true; NFS_PID=; }
size_of() { "$S" stat --json "$1" 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["size"])' 2>/dev/null || true; }
cleanup() { umount_; unfs_; stop; }
trap cleanup EXIT
export STRATA_SERVER=127.0.0.1:$PORT
CFG=$OUT/mount.toml
{ echo "listen = \"127.0.0.1:$PORT\""; echo "data_dir = \"$SCRATCH/data\""; echo 'reclaim_every = "1s"'; echo 'reclaim_grace = "0s"'
  echo "[mover]"; echo "listen = \"127.0.0.1:$((PORT+1))\""; echo "[library]"; echo "drives = 0"; } > "$CFG"

echo "# bench/mount.sh report — $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) CPUs, $(free -g | awk '/Mem/{print $2}') GiB, $(uname -r)"
echo "file system under test: $(df -T "$SCRATCH" | awk 'NR==2{print $2" on "$1}')"
rm -rf "$SCRATCH/data"; start "$CFG"; mount_; nfs_
[ -z "$BEFORE" ] || mount_ "$OUT/strata-before" "$MNT_B"

if [[ " $PARTS " == *" seq "* ]]; then
  SRC=$SCRATCH/src.dat
  source_file "$SRC" $((SIZE_MB<<20))
  B=$((SIZE_MB<<20))
  declare -A T
  for r in $(seq "$REPS"); do
    seq_baselines "$SRC" "$B"
    drop; cat "$SRC" > /dev/null
    t0=$(now); "$S" --no-handover put "$SRC" /api.dat; t1=$(now); T[nho,w]+="$(rate $B "$t0" "$t1") "
    drop; t0=$(now); "$S" --no-handover get /api.dat - > /dev/null; t1=$(now); T[nho,r]+="$(rate $B "$t0" "$t1") "
    "$S" rm /api.dat
    drop; cat "$SRC" > /dev/null
    t0=$(now); dd if="$SRC" of="$MNT/mnt.dat" bs=4M status=none; t1=$(now); T[mnt,w]+="$(rate $B "$t0" "$t1") "
    drop; t0=$(now); dd if="$MNT/mnt.dat" of=/dev/null bs=4M status=none; t1=$(now); T[mnt,r]+="$(rate $B "$t0" "$t1") "
    cmp -s "$SRC" "$MNT/mnt.dat" || { echo "the file read back through the mount differs"; exit 1; }
    rm "$MNT/mnt.dat"
    if [ -n "$BEFORE" ]; then
      drop; cat "$SRC" > /dev/null
      t0=$(now); dd if="$SRC" of="$MNT_B/mnt.dat" bs=4M status=none; t1=$(now); T[bef,w]+="$(rate $B "$t0" "$t1") "
      drop; t0=$(now); dd if="$MNT_B/mnt.dat" of=/dev/null bs=4M status=none; t1=$(now); T[bef,r]+="$(rate $B "$t0" "$t1") "
      cmp -s "$SRC" "$MNT_B/mnt.dat" || { echo "the file read back through the mount of $BEFORE differs"; exit 1; }
      rm "$MNT_B/mnt.dat"
    fi
    drop; cat "$SRC" > /dev/null
    t0=$(now); "$OUT/nfsbench" write -port $NFS_PORT -src "$SRC" -dst /nfs.dat > /dev/null; t1=$(now)
    until [ "$(size_of /nfs.dat)" = "$B" ]; do sleep 0.02; done; t2=$(now)
    T[nfs,w]+="$(rate $B "$t0" "$t1") "; T[nfs,s]+="$(rate $B "$t0" "$t2") "
    drop; t0=$(now); n=$("$OUT/nfsbench" read -port $NFS_PORT -src /nfs.dat); t1=$(now); T[nfs,r]+="$(rate $B "$t0" "$t1") "
    [ "$n" = "$B" ] || { echo "NFS read $n bytes of $B"; exit 1; }
    "$S" rm /nfs.dat
    sleep 2
  done
  echo; echo "## ${SIZE_MB} MiB in sequence: the mount (dd bs=4M) against strata put/get (MB/s, median of $REPS, taking turns)"
  echo; echo "| op | disk alone (dd) | strata put / get | the same, --no-handover | through the mount | mount / API | mount / --no-handover |"; echo "|---|---|---|---|---|---|---|"
  for op in w r; do
    d=$(median ${T[disk,$op]}); a=$(median ${T[api,$op]}); h=$(median ${T[nho,$op]}); m=$(median ${T[mnt,$op]})
    name=write; [ $op = r ] && name=read
    echo "| $name | $d | $a | $h | $m | $(ratio "$m" "$a") | $(ratio "$m" "$h") |"
  done
  if [ -n "$BEFORE" ]; then
    echo; echo "## The mount of this build ($(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . ':!bench' || echo +)) against the mount of $BEFORE, same server, same turns (MB/s, median of $REPS)"
    echo; echo "| op | mount of $BEFORE | mount of this build | this / before | before / API | this / API |"; echo "|---|---|---|---|---|---|"
    for op in w r; do
      b=$(median ${T[bef,$op]}); m=$(median ${T[mnt,$op]}); a=$(median ${T[api,$op]})
      name=write; [ $op = r ] && name=read
      echo "| $name | $b | $m | $(ratio "$m" "$b") | $(ratio "$b" "$a") | $(ratio "$m" "$a") |"
    done
  fi
  echo; echo "## The same file through \`strata nfs\` (nfsbench: 1 MiB calls, one at a time), against the FUSE mount (MB/s, median of $REPS, same turns)"
  echo; echo "| op | through the mount | NFS, calls answered | NFS, file stored | NFS / mount | NFS / API |"; echo "|---|---|---|---|---|---|"
  m=$(median ${T[mnt,w]}); n=$(median ${T[nfs,w]}); st=$(median ${T[nfs,s]})
  echo "| write | $m | $n | $st | $(ratio "$st" "$m") | $(ratio "$st" "$(median ${T[api,w]})") |"
  m=$(median ${T[mnt,r]}); n=$(median ${T[nfs,r]})
  echo "| read | $m | $n | | $(ratio "$n" "$m") | $(ratio "$n" "$(median ${T[api,r]})") |"
  echo; echo "raw: $(for k in "${!T[@]}"; do echo -n "$k: ${T[$k]}; "; done)"
fi

if [[ " $PARTS " == *" md "* ]]; then
  declare -A M
  "$S" mkdir /md
  for r in $(seq "$REPS"); do
    j=$("$OUT/corebench" md --server 127.0.0.1:$PORT --clients 1 --files "$FILES" --phases create,stat --under /md)
    for ph in create stat; do M[api,$ph]+="$(echo "$j" | python3 -c "import json,sys;print(json.load(sys.stdin)['${ph}_per_s'])") "; done
    d=$("$S" ls /md | head -1); d=${d%/}
    t0=$(now); "$S" ls -l "/md/$d/c0" > /dev/null; t1=$(now); M[api,ls]+="$(ops "$FILES" "$t0" "$t1") "
    sleep 2 # past the mount's attribute timeout: nothing of it cached
    t0=$(now); ls -l "$MNT/md/$d/c0" > /dev/null; t1=$(now); M[mnt,ls]+="$(ops "$FILES" "$t0" "$t1") "
    "$S" rm -r /md/"$d"
    j=$("$OUT/corebench" md --posix "$MNT/md" --clients 1 --files "$FILES" --phases create,stat)
    for ph in create stat; do M[mnt,$ph]+="$(echo "$j" | python3 -c "import json,sys;print(json.load(sys.stdin)['${ph}_per_s'])") "; done
    rm -rf "${MNT:?}"/md/*
  done
  echo; echo "## Metadata of $FILES files, one client: the mount against the API (ops/s, median of $REPS; ls -l: entries/s)"
  echo; echo "| op | API (corebench md, strata ls -l) | through the mount (corebench md --posix, ls -l) | mount / API |"; echo "|---|---|---|---|"
  for ph in create stat ls; do
    a=$(median ${M[api,$ph]}); m=$(median ${M[mnt,$ph]})
    name=$ph; [ $ph = ls ] && name="ls -l"
    echo "| $name | $a | $m | $(ratio "$m" "$a") |"
  done
  echo; echo "raw: $(for k in "${!M[@]}"; do echo -n "$k: ${M[$k]}; "; done)"
fi
