#!/usr/bin/env bash
# scripts/pjdfstest.sh — run the pjdfstest POSIX conformance suite inside
# `strata mount`, for docs/POSIX.md.
#
#   scripts/pjdfstest.sh [SRC]     # SRC: pjdfstest's source (default ../shared/conformance/pjdfstest)
#
# It builds pjdfstest (autoreconf, configure, make: installs autoconf and
# automake if missing), starts a server of its own on ports 7480-7481, and
# mounts it as a gateway (--allow-other --no-root-squash: pjdfstest acts as
# many users and as root), then runs `prove -r` over every category and
# prints prove's summary and a table of failed subtests per category.
# Runs as root.
set -euo pipefail
cd "$(dirname "$0")/.."
SRC=${1:-../shared/conformance/pjdfstest}
W=${W:-/tmp/strata-pjdfstest}
command -v autoreconf >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq autoconf automake >/dev/null; }
rm -rf "$W" && mkdir -p "$W/mnt"
cp -r "$SRC" "$W/pjd"
(cd "$W/pjd" && autoreconf -ifs && ./configure && make pjdfstest) > "$W/build.log" 2>&1
go build -o "$W/strata" ./cmd/strata
printf 'listen = "127.0.0.1:7480"\ndata_dir = "%s/data"\n[mover]\nlisten = "127.0.0.1:7481"\n[library]\ndrives = 0\n' "$W" > "$W/strata.toml"
"$W/strata" serve --config "$W/strata.toml" > "$W/serve.log" 2>&1 & SERVER=$!
for _ in $(seq 100); do curl -sf http://127.0.0.1:7480/healthz >/dev/null && break; sleep 0.1; done
STRATA_SERVER=127.0.0.1:7480 "$W/strata" mount --allow-other --no-root-squash "$W/mnt" > "$W/mount.log" 2>&1 & MOUNT=$!
trap 'kill -INT $MOUNT 2>/dev/null; wait $MOUNT 2>/dev/null; kill $SERVER 2>/dev/null; wait $SERVER 2>/dev/null' EXIT
for _ in $(seq 100); do grep -q " $W/mnt " /proc/self/mountinfo && break; sleep 0.1; done
(cd "$W/mnt" && prove -r "$W/pjd/tests/" > "$W/prove.log" 2>&1) || true
grep -E '^Files=|^Result' "$W/prove.log"
python3 - "$W/prove.log" <<'PY'
import re, sys, collections
cat = collections.defaultdict(lambda: [0, 0])
cur = None
for l in open(sys.argv[1]):
    m = re.match(r'^\S*/tests/(\w+)/\S+\.t\s+\(Wstat: \d+ Tests: (\d+) Failed: (\d+)\)', l)
    if m:
        cat[m.group(1)][1] += int(m.group(3))
print("| category | failed subtests |")
print("|---|---|")
for c in sorted(cat):
    print(f"| {c} | {cat[c][1]} |")
PY
