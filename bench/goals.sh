#!/usr/bin/env bash
# bench/goals.sh — the throughput goals of docs/PERFORMANCE.md in one run:
# one migration and one recall stream (stream.sh), small files in
# (small.sh), small files to tape and the recall gaps (hsm.sh's tape
# part), a client on another host (core.sh's remote part), creates and
# stats with 1, 8 and 64 clients (core.sh's md part), and the core's memory
# and the policy pass as the namespace grows to 2 M entries (namespace.sh).
# Each script sets its own baselines in the same run; this one runs them in
# turn with their defaults (three runs each), keeps each report in
# bench/out/goals/NAME.md and prints how long each took (docs/PERFORMANCE.md
# gives the total).
#
# small.sh waits a minute after a sync before it starts (files freed just
# before would make its creates slower); stream.sh frees only a few large
# files, so when it runs first that wait counts from the start of this
# script.
#
#   bench/goals.sh              # all; the run time of each is printed
#   ONLY="small stream" bench/goals.sh
set -euo pipefail
cd "$(dirname "$0")/.."
ONLY=${ONLY:-"stream small tape remote md namespace"}
DIR=bench/out/goals
mkdir -p "$DIR"

declare -A RUN=(
  [stream]="bench/stream.sh"
  [small]="bench/small.sh"
  [tape]="env PARTS=tape bench/hsm.sh"
  [remote]="env PARTS=remote bench/core.sh"
  [md]="env PARTS=md bench/core.sh"
  [namespace]="bench/namespace.sh"
)
times=()
sync; t00=$(date +%s); quiet=1 # only parts that free few files so far
for name in $ONLY; do
  [ -n "${RUN[$name]:-}" ] || { echo "bench/goals.sh: no part $name (parts: ${!RUN[*]})" >&2; exit 2; }
  t0=$(date +%s)
  if [ $name = small ] && [ $quiet = 1 ]; then export QUIET=$(( t0 - t00 < 65 ? 65 - (t0 - t00) : 0 )); fi
  [ $name = stream ] || quiet=0
  ${RUN[$name]} > "$DIR/$name.md"
  times+=("| $name | \`${RUN[$name]}\` | $(( $(date +%s) - t0 )) s |")
  echo "$name done in $(( $(date +%s) - t0 )) s: $DIR/$name.md" >&2
done
echo "# bench/goals.sh — $(date -u +%Y-%m-%dT%H:%MZ), commit $(git rev-parse --short HEAD)"
echo
echo "| part | command | run time |"
echo "|---|---|---|"
printf '%s\n' "${times[@]}"
echo "| all | | $(( $(date +%s) - t00 )) s |"
echo
for name in $ONLY; do cat "$DIR/$name.md"; echo; done
