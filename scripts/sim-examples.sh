#!/usr/bin/env bash
# scripts/sim-examples.sh — regenerate docs/sim/: the tables (.txt), CSV
# and charts (.svg) docs/SIMULATION.md shows, from the studies in
# examples/sim and the strata bench reports in docs/bench. The simulator is
# deterministic: on an unchanged tree this changes nothing but what
# depends on a measurement. The validation runs (validation-*, recall-run*,
# recall-byte-order) are measurements, made by bench/simval.sh; the
# catalog's (catalog-predicted, catalog-measured) a record of predictions
# made before bench/core.sh measured them (PARTS=mdcal, then mdload), and
# catalog-curve its measurement of creates against clients (PARTS=mdcurve).
#
#   scripts/sim-examples.sh
set -euo pipefail
cd "$(dirname "$0")/.."
S=$(mktemp -d)/strata
trap 'rm -rf "$(dirname "$S")"' EXIT
go build -o "$S" ./cmd/strata
out=docs/sim

# sweep NAME STUDY [--set k=v]...: a sweep's table, CSV and chart.
sweep() {
  local name=$1 study=$2; shift 2
  "$S" sim sweep "$study" "$@" --csv "$out/$name.csv" --svg "$out/$name.svg" > "$out/$name.txt"
  echo "$out/$name.{txt,csv,svg}"
}
sweep seed002-cluster examples/sim/seed002-case4.toml
sweep seed002-table1 examples/sim/seed002-table1.toml
sweep seed002-table2 examples/sim/seed002-table2.toml
sweep alice-write examples/sim/alice-stripe.toml --set workload.op=write
sweep alice-read examples/sim/alice-stripe.toml --set workload.op=read
sweep alice-streams examples/sim/alice-streams.toml
sweep alice-disks examples/sim/alice-disks.toml
sweep recall-rules examples/sim/recall-rules.toml
sweep migrate-alice examples/sim/migrate-alice.toml
sweep cemss-lto1 examples/sim/cemss-lto1.toml
sweep cemss-char-write examples/sim/cemss-char.toml --set workload.op=write
sweep cemss-char-read examples/sim/cemss-char.toml --set workload.op=read
sweep cemss-1tb-write examples/sim/cemss-1tb.toml --set workload.op=write
sweep cemss-1tb-read examples/sim/cemss-1tb.toml --set workload.op=read
sweep hpcs-random examples/sim/hpcs-random.toml
sweep raid-rebuild examples/sim/raid-rebuild.toml
sweep declustered examples/sim/declustered.toml
sweep tape-failures examples/sim/tape-failures.toml
sweep site-5pb examples/sim/site-5pb.toml
sweep tiers examples/sim/tiers.toml

# calibrate NAME REPORT: the fit of a strata bench report, held-out errors
# included, with the command in its first line.
calibrate() {
  { echo "\$ strata sim calibrate --holdout $2"; "$S" sim calibrate --holdout "$2"; } > "$out/$1.txt"
  echo "$out/$1.txt"
}
calibrate calibrate-posix docs/bench/posix/report.json
calibrate calibrate-strata docs/bench/strata/report.json
