#!/usr/bin/env bash
# bench/simval.sh — the measurements behind docs/SIMULATION.md's validation.
#
#   bench/simval.sh                # ~10 minutes
#   PARTS=capped bench/simval.sh   # only part 1 (or PARTS=recall)
#
# 1. Strata with bandwidth-capped devices: strata bench runs cemss-char
#    (one stream, I/O size swept) and scaling (N clients × M-way striped
#    files) against a server with four devices capped at CAP each; strata
#    sim calibrate fits t(s) = t0 + s/R on cemss-char alone and predicts
#    every scaling point with the DES (N streams striped over M of the four
#    devices), printing predicted against measured.
# 2. Strata with an emulated LTO-9 library: bench/hsmbench --parts recall
#    migrates files, purges them, stages random sets, and compares what the
#    library did with strata sim replaying the same requests through the
#    same scheduler.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/bench/out/simval}
CAP=${CAP:-50MB}
PORT=7460
PARTS=${PARTS:-"capped recall"}
mkdir -p "$OUT"
go build -o "$OUT/strata" ./cmd/strata
S=$OUT/strata
if [[ " $PARTS " == *" capped "* ]]; then
rm -rf "$OUT/data"
cat > "$OUT/serve.toml" <<TOML
listen = "127.0.0.1:$PORT"
data_dir = "$OUT/data"
default_cos = "single"
[mover]
listen = "127.0.0.1:$((PORT+1))"
[library]
enabled = false
TOML
for i in 0 1 2 3; do
  printf '[[device]]\nid = "d%d"\nbandwidth = "%s"\n' "$i" "$CAP" >> "$OUT/serve.toml"
done
"$S" serve --config "$OUT/serve.toml" > "$OUT/serve.log" 2>&1 &
PID=$!
trap 'kill $PID 2>/dev/null || true' EXIT
for _ in $(seq 100); do "$S" --server 127.0.0.1:$PORT ls / >/dev/null 2>&1 && break; sleep 0.1; done
echo "## Strata, 4 devices capped at $CAP each ($(date -u +%FT%TZ))"
echo
"$S" bench run cemss-char scaling --target strata://127.0.0.1:$PORT --scale small --json "$OUT/capped.json" > "$OUT/capped.txt"
echo '```'
echo "\$ strata sim calibrate --holdout $OUT/capped.json"
"$S" sim calibrate --holdout "$OUT/capped.json"
echo '```'
kill $PID; wait $PID 2>/dev/null || true
trap - EXIT
echo
fi
[[ " $PARTS " == *" recall "* ]] && go run ./bench/hsmbench --data "$OUT" --tapes /dev/shm/strata-simval --parts recall --gen LTO-9 --scale x100 \
  --recall-drives 1,2,4 --reps 3 --picks 40 --carts 8 --out "$OUT/recall"
