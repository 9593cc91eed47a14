#!/usr/bin/env bash
# bench/hsm.sh — the tape tier's figures for docs/PERFORMANCE.md.
#
#   bench/hsm.sh        # ~7 minutes; ~8 GiB under bench/out/scratch and in /dev/shm
#
# Migration rates against the emulated drives' native rate (LTO-5 in real
# time: 140 MB/s per drive), and the recall scheduler's decision time with
# 100,000 requests queued.
set -euo pipefail
cd "$(dirname "$0")/.."
SCRATCH=${SCRATCH:-$PWD/bench/out/scratch}
mkdir -p "$SCRATCH"
go run ./bench/hsmbench --data "$SCRATCH" --parts large,small --gib 8
go run ./bench/hsmbench --data "$SCRATCH" --parts scaling --gib 2 | tail -n 3
go run ./bench/hsmbench --data "$SCRATCH" --parts queue --queue 100000 | tail -n 7
echo
echo '## Recall scheduling, 100,000 requests on 200 cartridges, 8 drives (go test -bench Queue100k ./internal/sched)'
echo
go test -run XXX -bench Queue100k -benchtime 5x ./internal/sched/ | grep Benchmark
