# bench/lib.sh — sourced by the bench scripts: timing and the arithmetic
# of their reports.
now() { date +%s.%N; }
rate() { python3 -c "print(round($1/1e6/($3-$2)))"; }          # bytes t0 t1 -> MB/s
ops() { python3 -c "print(round($1/($3-$2)))"; }               # count t0 t1 -> per second
median() { python3 -c "import sys,statistics; print(round(statistics.median(float(x) for x in sys.argv[1:])))" "$@"; }
ratio() { python3 -c "print(f'{$1/$2:.2f}')"; }
# drop empties the page cache (as root; elsewhere it does nothing).
drop() { sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || true; }
