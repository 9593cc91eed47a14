#!/usr/bin/env bash
# bench/goals.sh — the throughput goals of docs/PERFORMANCE.md in one run:
# small files in (small.sh), one migration and one recall stream
# (stream.sh), small files to tape and the recall gaps (hsm.sh's tape
# part), a client on another host (core.sh's remote part), creates and
# stats with 1, 8 and 64 clients (core.sh's md part), the policy pass as
# the namespace grows (policy.sh) and the core's memory under creates
# (cache.sh). Each script sets its own baselines in the same run; this one
# runs them in turn with their defaults (three runs each), keeps each
# report in bench/out/goals/NAME.md and prints how long each took (22
# minutes in all here: docs/PERFORMANCE.md).
#
#   bench/goals.sh              # all; the run time of each is printed
#   ONLY="small stream" bench/goals.sh
set -euo pipefail
cd "$(dirname "$0")/.."
ONLY=${ONLY:-"small stream tape remote md policy cache"}
DIR=bench/out/goals
mkdir -p "$DIR"

declare -A RUN=(
  [small]="bench/small.sh"
  [stream]="bench/stream.sh"
  [tape]="env PARTS=tape bench/hsm.sh"
  [remote]="env PARTS=remote bench/core.sh"
  [md]="env PARTS=md bench/core.sh"
  [policy]="bench/policy.sh"
  [cache]="bench/cache.sh"
)
times=()
t00=$(date +%s)
for name in $ONLY; do
  [ -n "${RUN[$name]:-}" ] || { echo "bench/goals.sh: no part $name (parts: ${!RUN[*]})" >&2; exit 2; }
  t0=$(date +%s)
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
