#!/usr/bin/env bash
# bench/list.sh — listing one large directory, for docs/PERFORMANCE.md.
#
#   bench/list.sh              # 300,000 entries, 3 runs
#   FILES=1000000 bench/list.sh
#
# Creates FILES empty files in one Strata directory (catalog at sync =
# "normal": only the listing is measured) and the same in one local
# directory, then times `strata ls -l` against `ls -l` on the local one,
# alternating, and reports the wall time of each, the client's peak RSS and
# how much the server's peak RSS grew while it served the listing (from
# /proc/PID/status VmHWM: a server that held a whole listing would grow with
# the directory).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/bench/out}
FILES=${FILES:-300000}
REPS=${REPS:-3}
PORT=7490
W=$(mktemp -d "$OUT/list.XXXXXX" 2>/dev/null || { mkdir -p "$OUT"; mktemp -d "$OUT/list.XXXXXX"; })
trap 'pkill -f "serve --config $W/s.toml" 2>/dev/null || true; rm -rf "$W"' EXIT
go build -o "$W/strata" ./cmd/strata
go build -o "$W/corebench" ./bench/corebench
command -v /usr/bin/time >/dev/null || { apt-get update -qq && apt-get install -y -qq time >/dev/null; }
S=$W/strata
printf 'listen = "127.0.0.1:%d"\ndata_dir = "%s/data"\n[catalog]\nsync = "normal"\n[mover]\nlisten = "127.0.0.1:%d"\n' $PORT "$W" $((PORT + 1)) > "$W/s.toml"
export STRATA_SERVER=http://127.0.0.1:$PORT

start() {
  "$S" serve --config "$W/s.toml" > "$W/serve.log" 2>&1 &
  SERVER_PID=$!
  for _ in $(seq 100); do "$S" df > /dev/null 2>&1 && return; sleep 0.1; done
  echo "server did not start" >&2; cat "$W/serve.log" >&2; exit 1
}
stop() { kill "$SERVER_PID"; wait "$SERVER_PID" 2>/dev/null || true; }
hwm() { awk '/VmHWM/ {print $2}' "/proc/$1/status"; }

start
"$W/corebench" md --server 127.0.0.1:$PORT --clients 1 --files "$FILES" --phases create > /dev/null
D=$("$S" ls / | head -1); D=/${D%/}/c0
"$W/corebench" md --posix "$W" --clients 1 --files "$FILES" --phases create > /dev/null
L=$(ls -d "$W"/md-*/c0)
stop

echo "| run | strata ls -l (s) | client peak RSS (MiB) | server RSS growth (MiB) | local ls -l (s) | local ls peak RSS (MiB) | entries |"
echo "|---|---|---|---|---|---|---|"
for r in $(seq "$REPS"); do
  start
  h0=$(hwm "$SERVER_PID")
  /usr/bin/time -f "%e %M" -o "$W/t.s" "$S" ls -l "$D" > "$W/out.s"
  h1=$(hwm "$SERVER_PID")
  stop
  /usr/bin/time -f "%e %M" -o "$W/t.l" ls -l "$L" > /dev/null
  read -r ss sm < "$W/t.s"; read -r ls lm < "$W/t.l"
  echo "| $r | $ss | $((sm / 1024)) | $(((h1 - h0) / 1024)) | $ls | $((lm / 1024)) | $(wc -l < "$W/out.s") |"
done
