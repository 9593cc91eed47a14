#!/usr/bin/env bash
# bench/suite.sh — the whole strata bench suite at one scale on this
# machine's disk and on a Strata server (embedded defaults, its data on the
# same disk), for docs/BENCHMARKS.md: JSON, HTML and SVG charts under
# docs/bench/{posix,strata}/, and the elapsed time of each run.
#
#   bench/suite.sh [DIR] [SCALE]     DIR on the disk to test (default /var/tmp/strata-suite), SCALE small
set -euo pipefail
DIR=${1:-/var/tmp/strata-suite}
SCALE=${2:-small}
cd "$(dirname "$0")/.."
OUT=bench/out/suite
DOCS=docs/bench
mkdir -p "$OUT"
go build -o "$OUT/strata" ./cmd/strata
S=$OUT/strata
rm -rf "$DIR"; mkdir -p "$DIR"

# run NAME TARGET: one suite run, its reports into docs/bench/NAME.
run() {
	local name=$1 target=$2
	rm -rf "$DOCS/$name"; mkdir -p "$DOCS/$name"
	local t0; t0=$(date +%s.%N)
	"$S" bench run all --target "$target" --scale "$SCALE" \
		--json "$DOCS/$name/report.json" --html "$DOCS/$name/report.html" --charts "$DOCS/$name" > "$DOCS/$name/table.txt"
	python3 -c "import sys; print(f'$name: {float(sys.argv[2]) - float(sys.argv[1]):.0f} s')" "$t0" "$(date +%s.%N)"
}

run posix "posix:$DIR/posix"

PORT=7490
"$S" serve --data "$DIR/strata-data" --listen "127.0.0.1:$PORT" > "$OUT/serve.log" 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null; wait $SERVER 2>/dev/null; rm -rf "$DIR"' EXIT
for _ in $(seq 100); do "$S" --server "127.0.0.1:$PORT" ls / > /dev/null 2>&1 && break; sleep 0.1; done
run strata "strata://127.0.0.1:$PORT"
