#!/usr/bin/env bash
# bench/hsm.sh — the tape tier's figures for docs/PERFORMANCE.md.
#
#   bench/hsm.sh              # ~11 minutes; ~8 GiB under bench/out/scratch and in /dev/shm
#   PARTS=tape bench/hsm.sh   # only small files to tape and the recall gaps (~4 minutes)
#
# Migration rates against the emulated drives' native rate (LTO-5 in real
# time: 140 MB/s per drive); small files to tape against large ones of the
# same total (LTO-5 at x4, paired runs); a recall of every fourth file of a
# cartridge with and without reading through the gaps; the scheduler
# against first come, first served; and its decision time with 100,000
# requests queued. The runs of the tape parts are kept in
# bench/results/hsm.json.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
bench_setup
PARTS=${PARTS:-"migration tape"}
if [[ " $PARTS " == *" tape "* ]]; then
RUNS=$SCRATCH/hsm-runs.jsonl
rm -f "$RUNS"
# --prefault: the cartridges stand in for tape; their new tmpfs pages,
# which the host backs on first touch, must not bound the run.
go run ./bench/hsmbench --data "$SCRATCH" --parts tapesmall --scale x4 --prefault --runs "$RUNS" | tail -n +3
go run ./bench/hsmbench --data "$SCRATCH" --parts gaps --runs "$RUNS" | tail -n +3
echo
echo '### The scheduler against first come, first served (go test -run TestThousandRecallsOnTenCartridges -v ./internal/sched)'
echo
go test -count=1 -run TestThousandRecallsOnTenCartridges -v ./internal/sched/ | grep -o 'scheduled:.*'
save_results hsm < "$RUNS"
fi
[[ " $PARTS " == *" migration "* ]] || exit 0
go run ./bench/hsmbench --data "$SCRATCH" --parts large,small --gib 8 --prefault
go run ./bench/hsmbench --data "$SCRATCH" --parts scaling --gib 2 --prefault | tail -n 3
go run ./bench/hsmbench --data "$SCRATCH" --parts queue --queue 100000 | tail -n 7
echo
echo '## Recall scheduling, 100,000 requests on 200 cartridges, 8 drives (go test -bench Queue100k ./internal/sched)'
echo
go test -run XXX -bench Queue100k -benchtime 5x ./internal/sched/ | grep Benchmark
