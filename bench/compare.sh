#!/usr/bin/env bash
# bench/compare.sh — strata bench against fio on the same file system, in
# the same session, for docs/BENCHMARKS.md.
#
#   bench/compare.sh DIR [RUNS]     DIR on the file system to test (default 3 runs)
#   ONLY=write bench/compare.sh …   only the rows whose name contains "write"
#   FIRST=fio bench/compare.sh …    the reference always runs first in each pair
#                                   (FIRST=strata: strata bench; default: they alternate)
#
# Each comparison runs the strata bench scenario and the fio job that does
# the same I/O (sizes, block sizes, workers, durability, cache drop), RUNS
# times alternately (which goes first in a pair alternating too), and
# prints the medians and their ratio as a Markdown table. IOR and mdtest have no Debian package and their sources are not
# reachable here: fio stands in for IOR in the data rows, and mdbase.c (the
# inner loop of mdtest -F -u, in C, timed barrier to barrier) for mdtest in
# the metadata rows (fio's filecreate and filestat engines spend more per
# file than the file system does, so they measure fio). fio writes new
# files with --fallocate=none, as IOR and strata bench do: preallocation
# would move block (or tmpfs page) allocation out of the timed region; and
# with --mem=mmap, page-aligned buffers as Go's large allocations are (with
# its default malloc'd buffers fio reads tmpfs at half the speed: the
# kernel's copy to an unaligned destination is slower). Every run, of
# either tool, removes its files when done, so each starts from the same
# state (fio reusing just-freed blocks ran faster on this VM's disk).
# Needs root for drop_caches, gcc for mdbase.
set -euo pipefail
DIR=${1:?usage: bench/compare.sh DIR [RUNS]}
RUNS=${2:-3}
cd "$(dirname "$0")/.."
OUT=bench/out/compare
mkdir -p "$OUT" "$DIR"
go build -o "$OUT/strata" ./cmd/strata
command -v fio >/dev/null || { echo "compare.sh: fio is not installed (apt-get install fio)" >&2; exit 1; }
gcc -O2 -pthread -o "$OUT/mdbase" bench/mdbase.c

# mdb FIELD: one mdbase run (2 threads × 2,000 files) on a fresh directory,
# its files as deep below DIR as strata bench's
# (sb/strata-bench-PID/md-rates/REP/wK/f…): path lookup costs per component.
mdb() {
	rm -rf "$DIR/md"; mkdir -p "$DIR/md/run/md-rates/0"
	"$OUT/mdbase" "$DIR/md/run/md-rates/0" 2 2000 | python3 -c "import sys; f=sys.stdin.read().split(); print(f[f.index('$1')+1])"
	rm -rf "$DIR/md"
}

drop() { sync; echo 3 > /proc/sys/vm/drop_caches; }

# fio JOB... prints MiB/s (bw) or ops/s (iops) of the group: sum over jobs.
fiorun() {
	local what=$1; shift
	rm -rf "$DIR/fio"; mkdir -p "$DIR/fio"
	fio --directory="$DIR/fio" --group_reporting --output-format=json "$@" > "$OUT/fio.json"
	rm -rf "$DIR/fio" # as strata bench removes its files when done: the next run starts from the same state
	python3 - "$what" "$OUT/fio.json" <<'EOF'
import json, sys
what, path = sys.argv[1], sys.argv[2]
j = json.load(open(path))["jobs"][0]
d = j["write"] if j["write"]["total_ios"] > 0 else j["read"]
print(d["bw_bytes"] / 2**20 if what == "bw" else d["iops"])
EOF
}

# sb SCENARIO PHASE FIELD [ARGS...] prints one phase's figure from strata bench.
sb() {
	local sc=$1 phase=$2 field=$3; shift 3
	rm -rf "$DIR/sb"; mkdir -p "$DIR/sb"
	"$OUT/strata" bench run "$sc" --target "posix:$DIR/sb" --workers 2 --verify off --json "$OUT/sb.json" "$@" > /dev/null
	python3 - "$OUT/sb.json" "$phase" "$field" <<'EOF'
import json, sys
rep = json.load(open(sys.argv[1]))
for ph in rep["results"][0]["phases"]:
    if ph["name"] == sys.argv[2]:
        print(ph[sys.argv[3]]); break
else:
    sys.exit("no phase " + sys.argv[2])
EOF
}

# fio preparation for read rows: lay the files out, then drop caches.
fiolay() { rm -rf "$DIR/fio"; mkdir -p "$DIR/fio"; fio --directory="$DIR/fio" --output-format=json "$@" --rw=write --end_fsync=1 > /dev/null; }
fioread() {
	local what=$1; shift
	fio --directory="$DIR/fio" --group_reporting --output-format=json "$@" > "$OUT/fio.json"
	rm -rf "$DIR/fio"
	python3 - "$what" "$OUT/fio.json" <<'EOF'
import json, sys
j = json.load(open(sys.argv[2]))["jobs"][0]["read"]
print(j["bw_bytes"] / 2**20 if sys.argv[1] == "bw" else j["iops"])
EOF
}

# settle lets the previous run's writeback and discards finish, so no run
# pays for the one before it.
settle() { sync; sleep 2; }

row() { # name unit strata-cmd fio-cmd
	local name=$1 unit=$2 scmd=$3 fcmd=$4 s=() f=()
	[[ -z ${ONLY:-} || $name == *$ONLY* ]] || return 0
	for i in $(seq "$RUNS"); do
		# Which tool goes first alternates (ABBA), unless FIRST says: on
		# this VM's disk a write run's speed depends on what ran just
		# before it (blocks another run freed, their discards), and a
		# fixed order put that into one tool's figures.
		local first=${FIRST:-}
		[[ -n $first ]] || first=$([[ $((i % 2)) == 1 ]] && echo strata || echo fio)
		if [[ $first == fio ]]; then
			settle; f+=("$(eval "$fcmd")")
			settle; s+=("$(eval "$scmd")")
		else
			settle; s+=("$(eval "$scmd")")
			settle; f+=("$(eval "$fcmd")")
		fi
	done
	python3 - "$name" "$unit" "${s[*]}" "${f[*]}" <<'EOF'
import statistics, sys
name, unit, s, f = sys.argv[1], sys.argv[2], [float(x) for x in sys.argv[3].split()], [float(x) for x in sys.argv[4].split()]
ms, mf = statistics.median(s), statistics.median(f)
print(f"| {name} | {unit} | {mf:,.0f} | {ms:,.0f} | {ms/mf:.2f} | {' '.join(f'{x:,.0f}' for x in f)} | {' '.join(f'{x:,.0f}' for x in s)} |")
EOF
}

FSTYPE=$(findmnt -n -o FSTYPE --target "$DIR" | head -1)
echo "## $FSTYPE ($DIR), $RUNS runs each, $(date -u '+%Y-%m-%d %H:%M UTC')"
echo
echo "| comparison | unit | fio / mdbase (median) | strata bench (median) | ratio | fio / mdbase runs | strata bench runs |"
echo "|---|---|---|---|---|---|---|"
P="--ioengine=psync --name=j --fallocate=none --mem=mmap"
row "sequential write, 1 stream, 4 MiB × 512 MiB, fsync inside (hpcs01 write)" "MiB/s" \
	"sb hpcs01 write mib_per_s" \
	"fiorun bw $P --rw=write --bs=4m --size=512m --end_fsync=1"
row "sequential read, 1 stream, 4 MiB, after drop_caches (hpcs01 read)" "MiB/s" \
	"sb hpcs01 read mib_per_s" \
	"fiolay $P --bs=4m --size=512m; drop; fioread bw $P --rw=read --bs=4m --size=512m"
row "N-N write, 2 streams, 2 MiB × 256 MiB each, fsync inside (cemss-user write)" "MiB/s" \
	"sb cemss-user write mib_per_s" \
	"fiorun bw $P --rw=write --bs=2m --size=256m --numjobs=2 --end_fsync=1"
row "N-N read, 2 streams, 2 MiB, after drop_caches (cemss-user read)" "MiB/s" \
	"sb cemss-user read mib_per_s" \
	"fiolay $P --bs=2m --size=256m --numjobs=2; drop; fioread bw $P --rw=read --bs=2m --size=256m --numjobs=2"
# hpcs06 at small scale here: Z = 15 (block 1,200,000 bytes), 50 arrays,
# 2 workers, 80,000-byte transfers: worker k writes transfers of block
# (a·2 + k) for a = 0…49. fio's strided zones express IOR's -b/-t/-s.
Z6="--filename=ckpt --bs=80000 --numjobs=2 --offset_increment=1200000 --zonemode=strided --zonesize=1200000 --zoneskip=1200000 --size=120000000 --io_size=60000000"
row "N-1 strided write, 2 workers, 80,000 B transfers, shared file, fsync inside (hpcs06 write)" "MiB/s" \
	"sb hpcs06 write mib_per_s" \
	"fiorun bw $P --rw=write $Z6 --end_fsync=1"
row "N-1 strided read, 2 workers, 80,000 B transfers, after drop_caches (hpcs06 read)" "MiB/s" \
	"sb hpcs06 read mib_per_s" \
	"fiolay $P $Z6; drop; fioread bw $P --rw=read $Z6"
row "random 4 KiB write, 2 workers, own 64 MiB file each, 3 s, fsync at end (hpcs13)" "IOPS" \
	"sb hpcs13 'randwrite 4KiB' ops_per_s" \
	"fiorun iops $P --rw=randwrite --bs=4k --size=64m --numjobs=2 --time_based --runtime=3 --norandommap --randrepeat=0 --end_fsync=1 --file_service_type=random --overwrite=1"
# fadvise_hint=0: fio marks random-read files POSIX_FADV_RANDOM by default,
# turning off the kernel's read-around after the cache drop; IOR and strata
# bench give no hint, so neither does fio here.
row "random 4 KiB read, 2 workers, own 64 MiB file each, 3 s, after drop_caches (hpcs13)" "IOPS" \
	"sb hpcs13 'randread 4KiB' ops_per_s" \
	"fiolay $P --bs=4m --size=64m --numjobs=2; drop; fioread iops $P --rw=randread --bs=4k --size=64m --numjobs=2 --time_based --runtime=3 --norandommap --randrepeat=0 --fadvise_hint=0"
row "create 0-byte files, 2 workers × 2,000, a directory each (md-rates create 0 B)" "ops/s" \
	"sb md-rates 'create 0 B' ops_per_s" \
	"mdb create"
row "stat, 2 workers × 2,000 files (md-rates stat 0 B)" "ops/s" \
	"sb md-rates 'stat 0 B' ops_per_s" \
	"mdb stat"
row "delete, 2 workers × 2,000 files (md-rates delete 0 B)" "ops/s" \
	"sb md-rates 'delete 0 B' ops_per_s" \
	"mdb remove"
rm -rf "$DIR/fio" "$DIR/sb" "$DIR/md"
