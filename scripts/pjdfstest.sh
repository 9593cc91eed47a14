#!/usr/bin/env bash
# scripts/pjdfstest.sh — run the pjdfstest POSIX conformance suite inside
# `strata mount`, for docs/POSIX.md.
#
#   scripts/pjdfstest.sh [SRC]       # SRC: pjdfstest's source (default ../shared/conformance/pjdfstest)
#   ALL=1 scripts/pjdfstest.sh       # every test as written, FIFOs, devices, sockets and hard links too
#   KNOWN=scripts/pjdfstest-known.tsv scripts/pjdfstest.sh   # CI: fail on a failure of a kind not listed there
#
# By default it runs what applies to Strata, which has regular files,
# directories and symbolic links only: the tests' loops over file types
# leave out FIFOs, device files and sockets, and the link, mkfifo and
# mknod categories are not run.
#
# It builds pjdfstest (autoreconf, configure, make: installs autoconf and
# automake if missing), starts a server of its own on ports 7480-7481, and
# mounts it as a gateway (--allow-other --no-root-squash: pjdfstest acts as
# many users and as root), then runs `prove -rv` over every category and
# prints prove's summary and its failed subtests sorted by cause
# (scripts/pjdfstest-sort.py).
# Runs as root.
set -euo pipefail
cd "$(dirname "$0")/.."
SRC=${1:-../shared/conformance/pjdfstest}
[ -f "$SRC/pjdfstest.c" ] || { echo "scripts/pjdfstest.sh: no pjdfstest source at $SRC (see ../shared/conformance/README.md)" >&2; exit 1; }
W=${W:-/tmp/strata-pjdfstest}
command -v autoreconf >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq autoconf automake >/dev/null; }
rm -rf "$W" && mkdir -p "$W/mnt"
cp -r "$SRC" "$W/pjd"
# Passing subtests name what they tried too, so that the sorter can follow
# which files exist (scripts/pjdfstest-sort.py).
sed -i "s/echo \"ok \${ntest}\"$/echo \"ok \${ntest} - tried '\$*'\"/" "$W/pjd/tests/misc.sh"
CATS=$(ls -d "$W"/pjd/tests/*/)
if [ -z "${ALL:-}" ]; then
  # What applies to Strata: no FIFOs, device files or sockets in the
  # tests' loops over file types, and not the categories that test only
  # those or hard links.
  find "$W/pjd/tests" -name '*.t' -exec sed -i -E 's/^([[:space:]]*for [a-z0-9_]+ in [a-z ]*) fifo block char socket/\1/' {} +
  CATS=$(ls -d "$W"/pjd/tests/*/ | grep -vE '/(link|mkfifo|mknod)/$')
fi
(cd "$W/pjd" && autoreconf -ifs && ./configure && make pjdfstest) > "$W/build.log" 2>&1
go build -o "$W/strata" ./cmd/strata
printf 'listen = "127.0.0.1:7480"\ndata_dir = "%s/data"\n[mover]\nlisten = "127.0.0.1:7481"\n[library]\ndrives = 0\n' "$W" > "$W/strata.toml"
"$W/strata" serve --config "$W/strata.toml" > "$W/serve.log" 2>&1 & SERVER=$!
for _ in $(seq 100); do curl -sf http://127.0.0.1:7480/healthz >/dev/null && break; sleep 0.1; done
STRATA_SERVER=127.0.0.1:7480 "$W/strata" mount --allow-other --no-root-squash "$W/mnt" > "$W/mount.log" 2>&1 & MOUNT=$!
trap 'kill -INT $MOUNT 2>/dev/null; wait $MOUNT 2>/dev/null; kill $SERVER 2>/dev/null; wait $SERVER 2>/dev/null' EXIT
for _ in $(seq 100); do grep -q " $W/mnt " /proc/self/mountinfo && break; sleep 0.1; done
(cd "$W/mnt" && prove -rv $CATS > "$W/prove.log" 2>&1) || true
grep -E '^Files=|^Result' "$W/prove.log"
tests=$(sed -n 's/^Files=[0-9]*, Tests=\([0-9]*\),.*/\1/p' "$W/prove.log")
[ "${tests:-0}" -gt 1000 ] || { echo "pjdfstest: the suite did not run (${tests:-no} subtests)"; tail -20 "$W/prove.log" "$W/mount.log"; exit 1; }
# Every failed subtest, by what it tried and what came back; with KNOWN,
# a failure of a kind that file does not list fails the run (CI).
rc=0
python3 scripts/pjdfstest-sort.py "$W/prove.log" ${KNOWN:-} > "$W/sorted.md" || rc=$?
cat "$W/sorted.md"
exit $rc
