# bench/lib.sh — sourced by the bench scripts: their common start, timing
# and the arithmetic of their reports.

# bench_setup [TOOL...]: what every script starts with, from the
# repository's root: REPO, OUT and SCRATCH (bench/out and bench/out/scratch
# unless set), the strata binary built as $S, and the named tools of bench/
# built into $OUT.
bench_setup() {
  REPO=$PWD
  OUT=${OUT:-$REPO/bench/out}
  SCRATCH=${SCRATCH:-$OUT/scratch}
  mkdir -p "$OUT" "$SCRATCH"
  go build -o "$OUT/strata" ./cmd/strata
  S=$OUT/strata
  local t
  for t in "$@"; do go build -o "$OUT/$t" "./bench/$t"; done
}
now() { date +%s.%N; }
rate() { python3 -c "print(round($1/1e6/($3-$2)))"; }          # bytes t0 t1 -> MB/s
ops() { python3 -c "print(round($1/($3-$2)))"; }               # count t0 t1 -> per second
fmedian() { python3 -c "import sys,statistics; print(round(statistics.median(float(x) for x in sys.argv[1:]), 2))" "$@"; }
median() { python3 -c "import sys,statistics; print(round(statistics.median(float(x) for x in sys.argv[1:])))" "$@"; }
ratio() { python3 -c "print(f'{$1/$2:.2f}')"; }
# cpu_of PID: the core-seconds (user + system) a running process has used.
cpu_of() { awk -v t="$(getconf CLK_TCK)" '{print ($14+$15)/t}' "/proc/$1/stat"; }
# with_cpu CMD...: runs CMD (its output where the caller sends it) and
# leaves in CPU the core-seconds it and its children used.
with_cpu() {
  local f; f=$(mktemp)
  ( "$@" && times > "$f" ) || { rm -f "$f"; return 1; }
  CPU=$(awk 'NR==2{ s=0; for (i=1;i<=2;i++) { split($i, a, "m"); s+=a[1]*60+a[2] } print s }' "$f")
  rm -f "$f"
}
sum() { python3 -c "import sys; print(round(sum(float(x) for x in sys.argv[1:]), 2))" "$@"; }
# drop empties the page cache (as root; elsewhere it does nothing).
drop() { sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || true; }
# source_file PATH BYTES: a file of random bytes of that size, made once
# and kept for later runs.
source_file() {
  if [ ! -f "$1" ] || [ "$(stat -c %s "$1")" != "$2" ]; then
    head -c "$2" /dev/urandom > "$1"; sync
  fi
}
# seq_baselines SRC BYTES: one turn of the baselines a sequential
# comparison takes in the same run: the disk's own pace (dd with an fsync,
# dd reading after the cache is dropped) into T[disk,w] and T[disk,r], and
# strata put and get of SRC into T[api,w] and T[api,r]. Needs S, SCRATCH
# and the caller's associative array T.
seq_baselines() {
  local src=$1 b=$2 t0 t1
  drop; cat "$src" > /dev/null
  t0=$(now); dd if="$src" of="$SCRATCH/dd.dat" bs=4M conv=fsync status=none; t1=$(now); T[disk,w]+="$(rate "$b" "$t0" "$t1") "
  drop; t0=$(now); dd if="$SCRATCH/dd.dat" of=/dev/null bs=4M status=none; t1=$(now); T[disk,r]+="$(rate "$b" "$t0" "$t1") "
  rm -f "$SCRATCH/dd.dat"
  drop; cat "$src" > /dev/null
  t0=$(now); "$S" put "$src" /api.dat; t1=$(now); T[api,w]+="$(rate "$b" "$t0" "$t1") "
  drop; t0=$(now); "$S" get /api.dat - > /dev/null; t1=$(now); T[api,r]+="$(rate "$b" "$t0" "$t1") "
  "$S" rm /api.dat
}

# save_results NAME [KEY=VALUE...]: the runs a script collected, one JSON
# object per line on stdin, kept as bench/results/NAME.json with the
# script, date, commit (+ when the tree differs from it), machine and the
# given extra fields (VALUEs are JSON).
save_results() {
  local name=$1; shift
  mkdir -p "$REPO/bench/results"
  python3 -c "
import json, sys
doc = {'script': sys.argv[1], 'date': sys.argv[2], 'commit': sys.argv[3], 'machine': sys.argv[4]}
for kv in sys.argv[5:]:
    k, v = kv.split('=', 1)
    doc[k] = json.loads(v)
doc['runs'] = [json.loads(l) for l in sys.stdin if l.strip()]
print(json.dumps(doc, indent=1))" "bench/$(basename "$0")" "$(date -u +%Y-%m-%dT%H:%MZ)" \
    "$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . ':!bench/results' || echo +)" \
    "$(nproc) CPUs, $(free -g | awk '/Mem/{print $2}') GiB, $(df -T "$SCRATCH" | awk 'NR==2{print $2" on "$1}'), $(uname -r)" "$@" > "$REPO/bench/results/$name.json"
}
