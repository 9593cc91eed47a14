#!/usr/bin/env bash
# bench/simval.sh — the measurements behind docs/SIMULATION.md's validation.
#
#   bench/simval.sh                # ~10 minutes
#   PARTS=capped bench/simval.sh   # only part 1 (or PARTS=recall)
#   PARTS=recall GO=/tmp/go bench/simval.sh  # commit $OUT/recall, touch /tmp/go.d2; again for .d4
#   PARTS=client-predict bench/simval.sh; PARTS=client-measure bench/simval.sh
#   PARTS=migrate bench/simval.sh
#   PARTS=mixed GO=/tmp/go bench/simval.sh   # then commit $OUT/mixed, touch /tmp/go
#   PARTS=catalog-predict bench/simval.sh; PARTS=catalog-measure bench/simval.sh   # ~13 + ~11 minutes
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
#    same scheduler. The 1-drive runs calibrate the server's time per
#    file; before the 2-drive (4-drive) runs start, their predictions are
#    in $OUT/recall/recall-predicted-d2.txt (-d4), and with GO set the
#    part waits for the file $GO.d2 ($GO.d4) so they can be committed
#    first.
# 3. Repeats predicted before they are measured, reads into memory and
#    into local files: client-predict calibrates the server (cemss-char
#    and scaling, reads into memory) and the client's disk alone
#    (bench/sinkcal: a file written, then its fsync timed), and writes the
#    DES's predictions for every point of a repeat of that run, its reads
#    once into memory and once into local files, fsynced, as strata get
#    does ($OUT/client-predicted.txt, to be committed); client-measure then
#    runs both repeats on a fresh server (strata bench, strata bench
#    --sink) and prints measured beside predicted
#    ($OUT/client-validation.txt). DEVICES (4), CAP (50MB; none: uncapped)
#    and SCALING_MAX (the scale's) set the server and the largest N × M;
#    ROUNDS (1) runs of each, in turns, count by each point's median.
# 5. Ingest, migration and recalls at once on an emulated library:
#    bench/hsmbench --parts mixed fills cartridges, writes the load and the
#    site study replaying it to $OUT/mixed with the study's prediction,
#    waits until the file GO exists (commit the prediction first), runs
#    the load and prints measured beside predicted.
# 6. The catalog from strata bench alone: catalog-predict runs md-rates at
#    1, 8 and 64 workers on a fresh server, ROUNDS (3) times in turn, fits
#    the catalog from their medians (strata sim calibrate-catalog) and
#    writes the study and its predictions for 1–64 workers to
#    $OUT/catalog (commit them); catalog-measure then runs md-rates at 2,
#    4, 16 and 32 workers the same way and prints the fit's predictions
#    beside the measured medians ($OUT/catalog/validation.txt).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/bench/out/simval}
CAP=${CAP:-50MB}   # none: uncapped devices
SCALE=${SCALE:-small}
DEVICES=${DEVICES:-4}
SCALING=()
[[ -n ${SCALING_MAX:-} ]] && SCALING=(--scaling-max "$SCALING_MAX")
PORT=7460
PARTS=${PARTS:-"capped recall"}
mkdir -p "$OUT"
go build -o "$OUT/strata" ./cmd/strata
S=$OUT/strata
SINK=${SINK:-/var/tmp/strata-simval-sink}
PID=
# serve_capped starts a server with $DEVICES devices capped at $CAP each.
serve_capped() {
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
for i in $(seq 0 $((DEVICES-1))); do
  printf '[[device]]\nid = "d%d"\n' "$i" >> "$OUT/serve.toml"
  [[ $CAP == none ]] || printf 'bandwidth = "%s"\n' "$CAP" >> "$OUT/serve.toml"
done
"$S" serve --config "$OUT/serve.toml" > "$OUT/serve.log" 2>&1 &
PID=$!
trap 'kill $PID 2>/dev/null || true' EXIT
for _ in $(seq 100); do "$S" --server 127.0.0.1:$PORT ls / >/dev/null 2>&1 && break; sleep 0.1; done
}
stop_server() { kill $PID; wait $PID 2>/dev/null || true; trap - EXIT; }
if [[ " $PARTS " == *" capped "* ]]; then
serve_capped
echo "## Strata, 4 devices capped at $CAP each ($(date -u +%FT%TZ))"
echo
"$S" bench run cemss-char scaling --target strata://127.0.0.1:$PORT --scale small --json "$OUT/capped.json" > "$OUT/capped.txt"
echo '```'
echo "\$ strata sim calibrate --holdout $OUT/capped.json"
"$S" sim calibrate --holdout "$OUT/capped.json"
echo '```'
stop_server
echo
fi
# client_run NAME [strata bench flags]: one run of cemss-char and scaling
# on a fresh server, into $OUT/NAME.json.
client_run() {
  local name=$1; shift
  serve_capped
  "$S" bench run cemss-char scaling --target strata://127.0.0.1:$PORT --scale $SCALE "${SCALING[@]}" "$@" --json "$OUT/$name.json" > "$OUT/$name.txt"
  stop_server
}
CROUNDS=${ROUNDS:-1}
if [[ " $PARTS " == *" client-predict "* ]]; then
mkdir -p "$SINK"
rm -f "$OUT"/client-cal-*.json
for r in $(seq "$CROUNDS"); do client_run client-cal-$r; done
go run ./bench/sinkcal --dir "$SINK" --size 128MiB --reps 5 > "$OUT/client-sink.toml"
{ echo "# predicted $(date -u +%FT%TZ), commit $(git rev-parse --short HEAD), before the repeats were run"
  echo "# $DEVICES devices, bandwidth $CAP each; $CROUNDS calibration runs, each on a fresh server"
  echo "\$ strata sim calibrate client-cal-*.json --sink client-sink.toml"
  "$S" sim calibrate "$OUT"/client-cal-*.json --sink "$OUT/client-sink.toml"; } > "$OUT/client-predicted.txt"
cat "$OUT/client-predicted.txt"
fi
if [[ " $PARTS " == *" client-measure "* ]]; then
mkdir -p "$SINK"
rm -f "$OUT"/client-repeat-*.json "$OUT"/client-measured-*.json
for r in $(seq "$CROUNDS"); do  # in turns: into memory, into local files
  client_run client-repeat-$r
  client_run client-measured-$r --sink "$SINK"
done
against=$(cd "$OUT" && for f in client-repeat-*.json client-measured-*.json; do printf -- ' --against %s' "$f"; done)
{ echo "# measured $(date -u +%FT%TZ): $CROUNDS rounds, each a repeat into memory, then one with strata bench --sink $SINK, each on a fresh server"
  echo "\$ strata sim calibrate client-cal-*.json --sink client-sink.toml$against"
  (cd "$OUT" && "$S" sim calibrate client-cal-*.json --sink client-sink.toml $against); } > "$OUT/client-validation.txt"
cat "$OUT/client-validation.txt"
fi
# md_rounds NAME W...: ROUNDS rounds, each on a fresh server, of md-rates
# at every W in turn (each round starting one further along), into
# $OUT/catalog/NAME-W-ROUND.json.
md_rounds() {
  local name=$1; shift
  local ws=("$@") n=$#
  mkdir -p "$OUT/catalog"
  for r in $(seq "${ROUNDS:-3}"); do
    serve_capped
    for i in $(seq 0 $((n-1))); do
      w=${ws[$(((i + r - 1) % n))]}
      "$S" bench run md-rates --target strata://127.0.0.1:$PORT --workers "$w" --json "$OUT/catalog/$name-$w-$r.json" > /dev/null
    done
    stop_server
  done
}
if [[ " $PARTS " == *" catalog-predict "* ]]; then
CAP=none
md_rounds cal 1 8 64
( cd "$OUT/catalog"
  { echo "# strata sim's predictions for strata bench md-rates (0-byte files) against strata serve, made before the measurement"
    echo "# fitted $(date -u +%FT%TZ), commit $(git rev-parse --short HEAD), from ${ROUNDS:-3} rounds of md-rates at 1, 8 and 64 workers on fresh servers"
    echo "\$ strata sim calibrate-catalog --out catalog.toml --predict 1,2,4,8,16,32,64 cal-*.json"
    "$S" sim calibrate-catalog --out catalog.toml --predict 1,2,4,8,16,32,64 cal-*.json; } > predicted.txt )
cat "$OUT/catalog/predicted.txt"
fi
if [[ " $PARTS " == *" catalog-measure "* ]]; then
CAP=none
md_rounds md 2 4 16 32
( cd "$OUT/catalog"
  { echo "# measured $(date -u +%FT%TZ), commit $(git rev-parse --short HEAD): md-rates at 2, 4, 16 and 32 workers, ${ROUNDS:-3} rounds on fresh servers"
    echo "\$ strata sim calibrate-catalog cal-*.json --against md-*.json"
    "$S" sim calibrate-catalog cal-*.json $(for f in md-*.json; do echo --against "$f"; done); } > validation.txt )
cat "$OUT/catalog/validation.txt"
fi
if [[ " $PARTS " == *" migrate "* ]]; then
# 4. A migration to one real-time LTO-9 drive, against
#    docs/sim/validation/migrate-lto9.toml's prediction.
echo "## A migration of 2 × 1 GiB to one real-time LTO-9 drive ($(date -u +%FT%TZ))"
for rep in 1 2 3; do
  go run ./bench/hsmbench --data "$OUT/migrate" --tapes /dev/shm/strata-simval-migrate --gen LTO-9 --parts large --gib 2 --prefault | grep '^| 1 GiB'
done
echo "predicted: $("$S" sim run docs/sim/validation/migrate-lto9.toml | grep '^migrated')"
fi
if [[ " $PARTS " == *" mixed "* ]]; then
  go run ./bench/hsmbench --data "$OUT" --tapes /dev/shm/strata-simval-mixed --parts mixed --gen LTO-9 --scale x10 \
    --out "$OUT/mixed" --go "${GO:-$OUT/mixed/go}"
fi
if [[ " $PARTS " == *" recall "* ]]; then
  go run ./bench/hsmbench --data "$OUT" --tapes /dev/shm/strata-simval --parts recall --gen LTO-9 --scale x100 \
    --recall-drives 1,2,4 --reps 3 --picks 40 --carts 8 --out "$OUT/recall" ${GO:+--go "$GO"}
fi
