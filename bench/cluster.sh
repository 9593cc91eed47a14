#!/usr/bin/env bash
# bench/cluster.sh — Strata on several hosts of the test bed (network
# namespaces on shaped links, internal/testutil/netbed), for
# docs/PERFORMANCE.md ("Many hosts") and docs/SIMULATION.md:
#
#   bench/cluster.sh             # the parts below (about 20 minutes)
#   PARTS=seed002 bench/cluster.sh
#
# gbit     N clients × M movers (1 2 4 8 × 1 2 4) on 1 Gbit links, 64 MiB
#          a client, files spread over the movers (one stripe each) and
#          striped over all of them: aggregate put and get against raw TCP
#          through the same links from the same hosts (the bed's own
#          bound on this machine, same run) and the links' bound
#          min(N·I, M·I).
# seed002  seed 002's cluster test for real: the same on 100 Mbit links,
#          devices capped at 50 MB/s, 32 MiB a client, beside strata sim's
#          prediction of the same topology, bench/cluster-seed002-*.toml
#          (committed before the measurement).
# tape     one 2 GiB migration on an emulated LTO-7 and LTO-9 drive in real
#          time, the drive in the core's process and then on a tape
#          server's host, against the drive's own time for it (the data at
#          native rate and the flush that ends it); and the bytes the
#          core's link carried meanwhile (none, with a tape server).
#
# Needs root (namespaces). Each cell is one run; a bed per mover count.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
bench_setup
PARTS=${PARTS:-gbit seed002 tape}
echo "# bench/cluster.sh report — $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) CPUs, $(uname -r)"
for part in $PARTS; do
  echo
  case $part in
  gbit)
    echo "## 1 Gbit links"
    CLUSTER_RATE=1gbit CLUSTER_MB=64 CLUSTER_OUT=$OUT/cluster-gbit.json STRATA_BENCH_CLUSTER=1 \
      go test ./bench/clusterbench -run TestScaling -count=1 -v -timeout 60m | grep '^|'
    save_results cluster-gbit < "$OUT/cluster-gbit.json"
    ;;
  seed002)
    echo "## seed 002: 100 Mbit links, devices at 50 MB/s"
    for mode in distribute stripe; do
      echo; echo "strata sim sweep bench/cluster-seed002-$mode.toml (the prediction):"; echo
      "$S" sim sweep "bench/cluster-seed002-$mode.toml" | sed 's/^/    /'
    done
    echo
    CLUSTER_RATE=100mbit CLUSTER_MB=32 CLUSTER_DEVICE_BW=50MB/s CLUSTER_OUT=$OUT/cluster-seed002.json STRATA_BENCH_CLUSTER=1 \
      go test ./bench/clusterbench -run TestScaling -count=1 -v -timeout 60m | grep '^|'
    save_results cluster-seed002 < "$OUT/cluster-seed002.json"
    ;;
  tape)
    echo "## migration through a tape server"
    TAPE_OUT=$OUT/cluster-tape.json STRATA_BENCH_CLUSTER=1 \
      go test ./bench/clusterbench -run TestTapeServer -count=1 -v -timeout 30m | grep '^|'
    save_results cluster-tape < "$OUT/cluster-tape.json"
    ;;
  esac
done
