# bench/lib.sh — sourced by the bench scripts: timing and the arithmetic
# of their reports.
now() { date +%s.%N; }
rate() { python3 -c "print(round($1/1e6/($3-$2)))"; }          # bytes t0 t1 -> MB/s
ops() { python3 -c "print(round($1/($3-$2)))"; }               # count t0 t1 -> per second
median() { python3 -c "import sys,statistics; print(round(statistics.median(float(x) for x in sys.argv[1:])))" "$@"; }
ratio() { python3 -c "print(f'{$1/$2:.2f}')"; }
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
