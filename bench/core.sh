#!/usr/bin/env bash
# bench/core.sh — the core's speed figures for docs/PERFORMANCE.md.
#
#   bench/core.sh            # all three parts; prints a Markdown report
#   PARTS="md" bench/core.sh # only some of: single stripe md remote
#   PARTS=remote bench/core.sh # only a client on another host: put and get
#                              # over TCP against the disk (part of single)
#   PARTS=mdcal bench/core.sh  # the inputs strata sim's catalog model is
#                              # calibrated on (docs/SIMULATION.md)
#   PARTS=mdcurve bench/core.sh # creates against clients, 1 to 64: the
#                              # writer's groups and the CPU per create
#   PARTS=mdload bench/core.sh # creates, stats and removes against
#                              # clients, 1 to 64, with each side's CPU
#
# Every Strata figure is set against a baseline measured in the same run on
# the same file system, alternating with it (this machine is shared and its
# disk is noisy): dd copying the same page-cached source file with an fsync
# before it reports (what `strata put` does), dd and fio reading the stored
# object file after the page cache is dropped (what `strata get` does), and
# the same metadata operations on the local file system. Runs as root so it can drop caches. Needs ~14 GiB free
# under SCRATCH (default bench/out/scratch, on the repository's file system).
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
bench_setup corebench
REPS=${REPS:-3}
PARTS=${PARTS:-"single stripe md"}
SIZE_MB=${SIZE_MB:-4096}
command -v fio >/dev/null || { apt-get update -qq && apt-get install -y -qq fio >/dev/null; }
PORT=7450

# warm: the state before every timed write, for the baseline and strata
# alike: nothing cached but the source. (Writes into a page cache full of
# earlier writes pay for reclaim: 400 MB/s instead of 2.8 GB/s here.)
warm() { drop; cat "$@" > /dev/null; }

. bench/server.sh
# settle: after removing files, wait until the server has reclaimed their
# space and the file system has finished with it (freeing and discarding
# gigabytes on ext4 competes with whatever is measured next).
settle() {
  for _ in $(seq 100); do
    used=$("$S" df --json | python3 -c 'import json,sys; print(sum(d["used"] for d in json.load(sys.stdin)["devices"]))')
    [ "$used" = 0 ] && break; sleep 0.2
  done
  sync; sleep 2
}
trap stop EXIT
export STRATA_SERVER=127.0.0.1:$PORT

config() { # data-dir devices width bandwidth [device-root]
  local f=$OUT/bench.toml root=${5:-$1/devices}
  { echo "listen = \"127.0.0.1:$PORT\""; echo "data_dir = \"$1\""; echo 'reclaim_every = "1s"'; echo 'reclaim_grace = "0s"'
    echo "[mover]"; echo "listen = \"127.0.0.1:$((PORT+1))\""
    for i in $(seq 0 $(($2-1))); do echo "[[device]]"; echo "id = \"d$i\""; echo "path = \"$root/d$i\""; [ "$4" != 0 ] && echo "bandwidth = \"$4\""; done
    echo "[[cos]]"; echo 'name = "default"'; echo 'pool = "disk"'; echo "stripe_width = $3"; echo 'stripe_unit = "4MiB"'
  } > "$f"; echo "$f"
}

echo "# bench/core.sh report — $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) CPUs, $(free -g | awk '/Mem/{print $2}') GiB, $(uname -r)"
echo "file system under test: $(df -T "$SCRATCH" | awk 'NR==2{print $2" on "$1}'), strata $("$S" --version | awk '{print $3}')"

SRC=$SCRATCH/src.dat
if [ ! -f "$SRC" ] || [ "$(stat -c %s "$SRC")" != $((SIZE_MB<<20)) ]; then
  head -c $((SIZE_MB<<20)) /dev/urandom > "$SRC"; sync
fi
cat "$SRC" > /dev/null   # the source is page-cached for dd and strata alike
BYTES=$((SIZE_MB<<20))

if [[ " $PARTS " == *" single "* ]]; then
  rm -rf "$SCRATCH/data"; start "$(config "$SCRATCH/data" 1 1 0)"
  dw=(); ddw=(); fw=(); sp=(); dr=(); ddr=(); fr=(); sg=(); sgs=(); sgt=(); spn=(); sph=(); sphn=(); sptn=(); spt=(); sps=(); hs=(); hb=()
  for r in $(seq "$REPS"); do
    warm "$SRC"; t0=$(now); dd if="$SRC" of="$SCRATCH/dd.dat" bs=1M conv=fsync status=none; t1=$(now); dw+=("$(rate $BYTES "$t0" "$t1")")
    rm -f "$SCRATCH/dd.dat"
    # The disk alone: fio writing from memory, O_DIRECT, 8 requests in
    # flight, fsync at the end. No source file to read, so not the same
    # work as a put; reported beside the ratios, not in them.
    warm "$SRC"; t0=$(now); fio --name=w --filename="$SCRATCH/fio.dat" --rw=write --bs=1M --direct=1 --ioengine=libaio --iodepth=8 --size=${SIZE_MB}M --end_fsync=1 >/dev/null; t1=$(now); fw+=("$(rate $BYTES "$t0" "$t1")")
    rm -f "$SCRATCH/fio.dat"; sync
    warm "$SRC"; t0=$(now); dd if="$SRC" of="$SCRATCH/dd.dat" bs=4M oflag=direct conv=fsync status=none; t1=$(now); ddw+=("$(rate $BYTES "$t0" "$t1")")
    # Each fixity hash on one core over the cached source: the ceiling of
    # a put that records it, whatever the disk does.
    warm "$SRC"; hs+=("$("$OUT/corebench" hash sha256 "$SRC")"); hb+=("$("$OUT/corebench" hash blake3 "$SRC")")
    # The puts take turns going first: the first write after dd's leaves
    # the disk still absorbing dd's 4 GiB and runs slower. On this host a
    # put passes its file to the mover; --no-handover streams it through
    # the mover's Unix socket, --tcp-only as from another host.
    for k in $(seq 0 6); do
      case $(( (r + k) % 7 )) in
      6) warm "$SRC"; t0=$(now); "$S" --tcp-only put "$SRC" /t$r; t1=$(now); spt+=("$(rate $BYTES "$t0" "$t1")") ;;
      5) warm "$SRC"; t0=$(now); "$S" put --fixity sha256 "$SRC" /s$r; t1=$(now); sps+=("$(rate $BYTES "$t0" "$t1")") ;;
      0) warm "$SRC"; t0=$(now); "$S" put "$SRC" /f$r; t1=$(now); sp+=("$(rate $BYTES "$t0" "$t1")") ;;
      1) warm "$SRC"; t0=$(now); "$S" put --no-fixity "$SRC" /n$r; t1=$(now); spn+=("$(rate $BYTES "$t0" "$t1")") ;;
      2) warm "$SRC"; t0=$(now); "$S" --no-handover put "$SRC" /h$r; t1=$(now); sph+=("$(rate $BYTES "$t0" "$t1")") ;;
      3) warm "$SRC"; t0=$(now); "$S" --no-handover put --no-fixity "$SRC" /hn$r; t1=$(now); sphn+=("$(rate $BYTES "$t0" "$t1")") ;;
      4) warm "$SRC"; t0=$(now); "$S" --tcp-only put --no-fixity "$SRC" /tn$r; t1=$(now); sptn+=("$(rate $BYTES "$t0" "$t1")") ;;
      esac
    done
    # The read baseline is dd reading the very file the gets read: the
    # object strata stored (its data, then a 16 KiB trailer), so layout and
    # the host's caching of it are the same for both. dd's reads and the
    # gets take turns going first: this VM's successive cold reads
    # alternate fast and slow phases, and an O_DIRECT read tends to leave
    # the next buffered one slow, so a fixed order favours some of them.
    obj=$("$S" stat --json /f$r | python3 -c 'import json,sys; print(json.load(sys.stdin)["layout"]["segments"][0]["object"])')
    obj=$(find "$SCRATCH/data/devices" -name "$obj")
    for k in $(seq 0 5); do
      case $(( (r + k) % 6 )) in
      5) drop; t0=$(now); fio --name=r --filename="$obj" --rw=read --bs=1M --direct=1 --ioengine=libaio --iodepth=8 --size=${SIZE_MB}M --readonly >/dev/null; t1=$(now); fr+=("$(rate $BYTES "$t0" "$t1")") ;;
      0) drop; t0=$(now); dd if="$obj" of=/dev/null bs=1M status=none; t1=$(now); dr+=("$(rate $BYTES "$t0" "$t1")") ;;
      1) drop; t0=$(now); dd if="$obj" of=/dev/null bs=4M iflag=direct status=none; t1=$(now); ddr+=("$(rate $BYTES "$t0" "$t1")") ;;
      2) drop; t0=$(now); "$S" get /f$r - > /dev/null; t1=$(now); sg+=("$(rate $BYTES "$t0" "$t1")") ;;
      3) drop; t0=$(now); "$S" --no-handover get /f$r - > /dev/null; t1=$(now); sgs+=("$(rate $BYTES "$t0" "$t1")") ;;
      4) drop; t0=$(now); "$S" --tcp-only get /f$r - > /dev/null; t1=$(now); sgt+=("$(rate $BYTES "$t0" "$t1")") ;;
      esac
    done
    "$S" rm /f$r /n$r /s$r /h$r /hn$r /tn$r /t$r; rm -f "$SCRATCH/dd.dat"; settle
  done
  stop
  best() { python3 -c "import sys; print(max(int(x) for x in sys.argv[1:]))" "$@"; }
  bw=$(best "$(median "${dw[@]}")" "$(median "${ddw[@]}")"); br=$(best "$(median "${dr[@]}")" "$(median "${ddr[@]}")" "$(median "${fr[@]}")")
  echo; echo "## 1. One stripe, one device, ${SIZE_MB} MiB file ($REPS runs, median MB/s)"
  echo; echo "Baselines in the same run: write+fsync with dd bs=1M buffered $(median "${dw[@]}"), dd bs=4M O_DIRECT $(median "${ddw[@]}");"
  echo "cold read of the stored object file with dd bs=1M buffered $(median "${dr[@]}"), dd bs=4M O_DIRECT $(median "${ddr[@]}"),"
  echo "fio bs=1M O_DIRECT libaio iodepth=8 $(median "${fr[@]}")."
  echo "Ratios are against the best write and the best read baseline. The disk alone, fio writing from memory"
  echo "(bs=1M O_DIRECT libaio iodepth=8, fsync at the end; no source file read): $(median "${fw[@]}") MB/s;"
  echo "against it put --no-fixity is $(ratio "$(median "${spn[@]}")" "$(median "${fw[@]}")"), put $(ratio "$(median "${sp[@]}")" "$(median "${fw[@]}")")."
  echo "Each fixity hash on one core over the cached source (corebench hash), the ceiling of a put recording it:"
  echo "BLAKE3 $(median "${hb[@]}") MB/s, SHA-256 $(median "${hs[@]}") MB/s; put --fixity sha256 is $(ratio "$(median "${sps[@]}")" "$(median "${hs[@]}")") of its ceiling."
  echo; echo "| operation | baseline | strata | ratio |"; echo "|---|---|---|---|"
  echo "| put (BLAKE3 fixity, the default; on the mover's host: the mover reads the file) | $bw | $(median "${sp[@]}") | $(ratio "$(median "${sp[@]}")" "$bw") |"
  echo "| put --fixity sha256 (the mover reads the file) | $bw | $(median "${sps[@]}") | $(ratio "$(median "${sps[@]}")" "$bw") |"
  echo "| put --no-fixity (CRC32C only; the mover reads the file) | $bw | $(median "${spn[@]}") | $(ratio "$(median "${spn[@]}")" "$bw") |"
  echo "| put --no-handover (BLAKE3; streamed through the mover's Unix socket) | $bw | $(median "${sph[@]}") | $(ratio "$(median "${sph[@]}")" "$bw") |"
  echo "| put --no-handover --no-fixity (streamed through the socket) | $bw | $(median "${sphn[@]}") | $(ratio "$(median "${sphn[@]}")" "$bw") |"
  echo "| put --tcp-only (BLAKE3 fixity; loopback TCP, as from another host) | $bw | $(median "${spt[@]}") | $(ratio "$(median "${spt[@]}")" "$bw") |"
  echo "| put --tcp-only --no-fixity (loopback TCP, as from another host) | $bw | $(median "${sptn[@]}") | $(ratio "$(median "${sptn[@]}")" "$bw") |"
  echo "| get - (cold cache; on the mover's host: the device file handed over) | $br | $(median "${sg[@]}") | $(ratio "$(median "${sg[@]}")" "$br") |"
  echo "| get --no-handover - (cold cache; streamed through the mover's Unix socket) | $br | $(median "${sgs[@]}") | $(ratio "$(median "${sgs[@]}")" "$br") |"
  echo "| get --tcp-only - (cold cache; loopback TCP, as from another host) | $br | $(median "${sgt[@]}") | $(ratio "$(median "${sgt[@]}")" "$br") |"
  echo; echo "runs: dd write ${dw[*]}; dd O_DIRECT write ${ddw[*]}; fio write ${fw[*]}; sha256 ${hs[*]}; blake3 ${hb[*]}; put ${sp[*]}; put --fixity sha256 ${sps[*]}; put --no-fixity ${spn[*]};"
  echo "put --no-handover ${sph[*]}; put --no-handover --no-fixity ${sphn[*]}; put --tcp-only ${spt[*]}; put --tcp-only --no-fixity ${sptn[*]};"
  echo "dd read ${dr[*]}; dd O_DIRECT read ${ddr[*]}; fio read ${fr[*]}; get ${sg[*]}; get --no-handover ${sgs[*]}; get --tcp-only ${sgt[*]}"
fi

# A client on another host (loopback TCP): put with the default BLAKE3
# fixity and without, get, against dd with O_DIRECT on the same file system,
# taking turns. The same rows as in part 1, alone, for a quick run.
if [[ " $PARTS " == *" remote "* ]]; then
  rm -rf "$SCRATCH/data"; start "$(config "$SCRATCH/data" 1 1 0)"
  ddw=(); spt=(); sptn=(); ddr=(); sgt=()
  for r in $(seq "$REPS"); do
    for k in 0 1 2; do
      case $(( (r + k) % 3 )) in
      0) warm "$SRC"; t0=$(now); dd if="$SRC" of="$SCRATCH/dd.dat" bs=4M oflag=direct conv=fsync status=none; t1=$(now); ddw+=("$(rate $BYTES "$t0" "$t1")") ;;
      1) warm "$SRC"; t0=$(now); "$S" --tcp-only put "$SRC" /t$r; t1=$(now); spt+=("$(rate $BYTES "$t0" "$t1")") ;;
      2) warm "$SRC"; t0=$(now); "$S" --tcp-only put --no-fixity "$SRC" /tn$r; t1=$(now); sptn+=("$(rate $BYTES "$t0" "$t1")") ;;
      esac
    done
    for k in 0 1; do
      case $(( (r + k) % 2 )) in
      0) drop; t0=$(now); dd if="$SCRATCH/dd.dat" of=/dev/null bs=4M iflag=direct status=none; t1=$(now); ddr+=("$(rate $BYTES "$t0" "$t1")") ;;
      1) drop; t0=$(now); "$S" --tcp-only get /t$r - > /dev/null; t1=$(now); sgt+=("$(rate $BYTES "$t0" "$t1")") ;;
      esac
    done
    "$S" rm /t$r /tn$r; rm -f "$SCRATCH/dd.dat"; settle
  done
  stop
  echo; echo "## A client on another host: loopback TCP, one device, ${SIZE_MB} MiB ($REPS runs, median MB/s)"
  echo; echo "| operation | dd O_DIRECT | strata | ratio |"; echo "|---|---|---|---|"
  echo "| put --tcp-only (BLAKE3 fixity) | $(median "${ddw[@]}") | $(median "${spt[@]}") | $(ratio "$(median "${spt[@]}")" "$(median "${ddw[@]}")") |"
  echo "| put --tcp-only --no-fixity | $(median "${ddw[@]}") | $(median "${sptn[@]}") | $(ratio "$(median "${sptn[@]}")" "$(median "${ddw[@]}")") |"
  echo "| get --tcp-only (cold cache) | $(median "${ddr[@]}") | $(median "${sgt[@]}") | $(ratio "$(median "${sgt[@]}")" "$(median "${ddr[@]}")") |"
  echo; echo "runs: dd write ${ddw[*]}; put ${spt[*]}; put --no-fixity ${sptn[*]}; dd read ${ddr[*]}; get ${sgt[*]}"
  printf '%s\n' "{\"dd_write\": [$(IFS=,; echo "${ddw[*]}")], \"put_tcp\": [$(IFS=,; echo "${spt[*]}")], \"put_tcp_no_fixity\": [$(IFS=,; echo "${sptn[*]}")], \"dd_read\": [$(IFS=,; echo "${ddr[*]}")], \"get_tcp\": [$(IFS=,; echo "${sgt[*]}")]}" | save_results core-remote size_mb=$SIZE_MB
fi

if [[ " $PARTS " == *" stripe "* ]]; then
  # The ceilings of this machine, measured in this run: the disk (8 dd
  # streams in parallel, O_DIRECT, like 8 devices sharing it), and strata
  # itself with the same 8 devices uncapped (software path + disk).
  warm "$SRC"; t0=$(now); for i in $(seq 0 7); do dd if="$SRC" of="$SCRATCH/p$i" bs=4M count=$((SIZE_MB/32)) skip=$((i*SIZE_MB/32)) oflag=direct conv=fsync status=none & done; wait; t1=$(now)
  diskw=$(rate $BYTES "$t0" "$t1"); drop
  t0=$(now); for i in $(seq 0 7); do dd if="$SCRATCH/p$i" of=/dev/null bs=4M iflag=direct status=none & done; wait; t1=$(now)
  diskr=$(rate $BYTES "$t0" "$t1"); rm -f "$SCRATCH"/p?
  rm -rf "$SCRATCH/data"; start "$(config "$SCRATCH/data" 8 8 0)"
  warm "$SRC"; t0=$(now); "$S" put --no-fixity "$SRC" /free; t1=$(now); freew=$(rate $BYTES "$t0" "$t1")
  drop; t0=$(now); "$S" get /free - > /dev/null; t1=$(now); freer=$(rate $BYTES "$t0" "$t1")
  "$S" rm /free; settle; stop
  rm -rf "$SCRATCH/data"; start "$(config "$SCRATCH/data" 8 1 200MB/s)"
  echo; echo "## 2. Striping over devices capped at 200 MB/s (file = 512 MiB × width, at most SIZE_MB)"
  echo; echo "Ceilings measured in this run: the disk, 8 parallel dd streams with O_DIRECT: write+fsync $diskw MB/s, read $diskr MB/s;"
  echo "strata on the same 8 devices uncapped (${SIZE_MB} MiB, 8 stripes): put --no-fixity $freew MB/s, get $freer MB/s."
  echo; echo "| width | target (w × 200 MB/s) | put MB/s | put / target | get MB/s (cold) | get / target |"; echo "|---|---|---|---|---|---|"
  for w in 1 2 4 8; do
    n=$((512*w)); [ $n -gt "$SIZE_MB" ] && n=$SIZE_MB; b=$((n<<20)); head -c $b "$SRC" > "$SCRATCH/w.dat"
    warm "$SCRATCH/w.dat"; t0=$(now); "$S" put --stripes $w --no-fixity "$SCRATCH/w.dat" /w$w; t1=$(now); p=$(rate $b "$t0" "$t1")
    drop; t0=$(now); "$S" get /w$w - > /dev/null; t1=$(now); g=$(rate $b "$t0" "$t1")
    tgt=$((200*w)); echo "| $w | $tgt | $p | $(ratio "$p" $tgt) | $g | $(ratio "$g" $tgt) |"
    rm -f "$SCRATCH/w.dat"; sync; sleep 2   # files stay until the end: no reclaim runs during a measurement
  done
  "$S" rm /w1 /w2 /w4 /w8; settle
  stop
fi

# The terms of strata sim's catalog model (examples/sim/catalog.toml), each
# from the run that isolates it, printed as the study's [catalog] lines:
#  - the group commit from the catalog alone, 4 to 32 goroutines: time per
#    commit against commits per group is a line in 1/group (the group's
#    time, sync_us + group_us, and commit_us), and the CPU per commit the
#    same way (group_us: the group's part that is CPU);
#  - the CPU of a request from 64 clients' stats (a stat is a request and
#    a cached lookup; at 64 clients no process goes idle, so none of its
#    CPU is a thread going to sleep or being woken), each side's, the
#    kernel's with the server's;
#  - a process's going idle and being woken from one client's stats, where
#    both happen to each process once an operation: its CPU beyond 64
#    clients' is 2 × (wake_us + park_us), and its time an operation is the
#    request's CPU, both sides', and two wake-ups (rtt_us = 0: on one
#    host's Unix socket there is no wire; the sockets' work is CPU);
#  - a create's and a remove's own CPU from 8 clients, less a stat's at 8
#    and the writer's share (commit_us and group_us over the measured
#    commits per group).
# The client's window and the writer's linger are the code's constants.
if [[ " $PARTS " == *" mdcal "* ]]; then
  echo; echo "## The catalog model's inputs"
  go test -c -o "$OUT/sqlite.test" ./internal/catalog/sqlite
  echo; echo "The catalog alone (go test -bench CommitEmpty/full ./internal/catalog/sqlite; goroutines = 4 × -cpu), median of $REPS:"; echo
  echo "| goroutines | µs per commit | commits per group | CPU µs per commit |"; echo "|---|---|---|---|"
  alone=()
  for cpu in 1 2 4 8; do
    rows=()
    for r in $(seq "$REPS"); do
      line=$( { /usr/bin/time -f "TIME %U %S" "$OUT/sqlite.test" -test.run XXX -test.bench 'CommitEmpty/full' -test.benchtime 20000x -test.cpu "$cpu"; } 2>&1 | grep -E "ns/op|^TIME")
      rows+=("$(echo "$line" | awk '/ns\/op/{t=$3/1000; g=$5} /^TIME/{c=($2+$3)*1e6/20000} END{print t, g, c}')")
    done
    m=$(printf '%s\n' "${rows[@]}" | python3 -c 'import statistics,sys; rows=[[float(x) for x in l.split()] for l in sys.stdin if l.strip()]; print(*(round(statistics.median(c), 2) for c in zip(*rows)))')
    alone+=("$m"); read -r t g c <<< "$m"
    echo "| $((4*cpu)) | $t | $g | $c |"
  done
  rm -rf "$SCRATCH/data"; start "$(config "$SCRATCH/data" 4 1 0)"
  st=()
  for r in $(seq "$REPS"); do
    st+=("$("$OUT/corebench" md --server 127.0.0.1:$PORT --clients 1 --files 10000 --phases create,stat --server-pid "$SERVER_PID" |
      python3 -c 'import json,sys;r=json.load(sys.stdin);print(r["stat_per_s"], r["stat_cpu_us"]["client"], r["stat_cpu_us"]["server"])')")
  done
  st1=$(printf '%s\n' "${st[@]}" | python3 -c 'import statistics,sys; rows=[[float(x) for x in l.split()] for l in sys.stdin if l.strip()]; print(*(round(statistics.median(c), 1) for c in zip(*rows)))')
  read -r r1 c1 s1 <<< "$st1"
  echo; echo "One client's stats over the core's Unix socket: $r1/s, CPU µs a stat: client $c1, server $s1 (median of $REPS)"
  # the catalog's group commits so far (groups, operations), from /metrics
  groups() { curl -s -H "Authorization: Bearer $STRATA_TOKEN" "http://127.0.0.1:$PORT/metrics" |
    awk '/^strata_catalog_group_operations_count/{c=$2} /^strata_catalog_group_operations_sum/{s=$2} END{print c, s}'; }
  echo; echo "CPU per operation, µs, and the commits per group (core's Unix socket; median of $REPS; machine: every process, the kernel's threads too):"
  echo; echo "| phase | clients | client | server | machine | commits per group |"; echo "|---|---|---|---|---|---|"
  cal=()
  for c in 8 64; do
    files=$((c == 8 ? 6000 : 1000))
    cj=(); rj=(); cg=(); rg=()
    for r in $(seq "$REPS"); do
      read -r g0 n0 < <(groups)
      cj+=("$("$OUT/corebench" md --server 127.0.0.1:$PORT --clients $c --files $files --phases create --server-pid "$SERVER_PID")")
      read -r g1 n1 < <(groups)
      rj+=("$("$OUT/corebench" md --server 127.0.0.1:$PORT --clients $c --files $files --phases create,stat,remove --server-pid "$SERVER_PID")")
      read -r g2 n2 < <(groups)
      cg+=("$(python3 -c "print(($n1-$n0)/($g1-$g0))")")
      # the second run's removes: its groups less those of a create phase like the first's
      rg+=("$(python3 -c "g=($g2-$g1)-($g1-$g0); print((($n2-$n1)-($n1-$n0))/g if g > 0 else 0)")")
    done
    for ph in create remove stat; do
      [ "$c" = 64 ] && [ "$ph" != stat ] && continue
      if [ "$ph" = create ]; then js=("${cj[@]}"); gs=("${cg[@]}"); else js=("${rj[@]}"); gs=("${rg[@]}"); fi
      row=$(printf '%s\n' "${js[@]}" | python3 -c '
import json, statistics, sys
ph, gs = sys.argv[1], [float(x) for x in sys.argv[2:]]
rs = [json.loads(l) for l in sys.stdin if l.strip()]
print(*("%.1f" % statistics.median(r[ph + "_cpu_us"][k] for r in rs) for k in ("client", "server", "machine")), "%.2f" % (statistics.median(gs) if ph != "stat" else 0))' "$ph" "${gs[@]}")
      cal+=("$ph $c $row")
      read -r cl sv ma gp <<< "$row"
      echo "| $ph | $c | $cl | $sv | $ma | $([ "$ph" = stat ] && echo - || echo "$gp") |"
    done
  done
  stop
  echo; echo "The terms (examples/sim/catalog.toml's [catalog]; client_us and server_us are a create's, a remove's in the comment):"; echo
  printf '%s\n' "${alone[@]}" "--" "$st1" "--" "${cal[@]}" | python3 -c '
import json, statistics, sys
parts, cur = [], []
for l in sys.stdin.read().splitlines():
    if l == "--": parts.append(cur); cur = []
    elif l.strip(): cur.append(l)
parts.append(cur)
alone = [[float(x) for x in l.split()] for l in parts[0]]
r1, c1, s1 = (float(x) for x in parts[1][0].split())
cal = {(l.split()[0], int(l.split()[1])): [float(x) for x in l.split()[2:]] for l in parts[2]}
def line(xs, ys):  # least squares y = a*x + b
    n = len(xs); mx, my = sum(xs) / n, sum(ys) / n
    a = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    return a, my - a * mx
inv = [1 / g for _, g, _ in alone]
per_group, commit = line(inv, [t for t, _, _ in alone])
group, _ = line(inv, [c for _, _, c in alone])
group = min(max(group, 0), per_group)
s64 = cal[("stat", 64)]
creq, sreq = s64[0], s64[2] - s64[0]
# one client: 1e6/r1 = creq + sreq + 2 wake; c1 + s1 = creq + sreq + 2 (wake + park)
wake_us = max((1e6 / r1 - creq - sreq) / 2, 0)
park_us = max((c1 + s1 - creq - sreq) / 2 - wake_us, 0)
s8 = cal[("stat", 8)]
def own(ph):
    c = cal[(ph, 8)]
    return max(c[0] - s8[0], 0), max((c[2] - c[0]) - (s8[2] - s8[0]) - commit - group / c[3], 0)
cc, cs = own("create"); rc, rs = own("remove")
print("rtt_us = 0        # one host: the sockets are CPU")
print("sync_us = %.0f" % (per_group - group))
print("group_us = %.0f" % group)
print("commit_us = %.0f" % commit)
print("client_request_us = %.0f" % creq)
print("server_request_us = %.0f" % sreq)
print("wake_us = %.0f" % wake_us)
print("park_us = %.0f" % park_us)
print("window = 8        # client/batch.go batchWindow")
print("linger_us = 300   # internal/catalog/sqlstore lingerFor")
print("client_us = %.0f    # remove: %.0f; stat: 0" % (cc, rc))
print("server_us = %.0f    # remove: %.0f; stat: 0" % (cs, rs))' | sed 's/^/    /'
fi

# Every operation at every load: ops/s and the CPU of each side per
# operation, 1 to 64 clients (docs/SIMULATION.md, the catalog; mdcurve
# adds the writer's groups for creates).
if [[ " $PARTS " == *" mdload "* ]]; then
  rm -rf "$SCRATCH/data"; start "$(config "$SCRATCH/data" 4 1 0)"
  echo; echo "## Creates, stats and removes against clients (core's Unix socket; median of $REPS; corebench md; CPU µs an operation)"
  echo; echo "| clients | creates/s | client | server | stats/s | client | server | removes/s | client | server |"
  echo "|---|---|---|---|---|---|---|---|---|---|"
  for c in 1 2 4 8 16 32 64; do
    files=$((12000 / c)); [ $files -lt 300 ] && files=300
    rows=()
    for r in $(seq "$REPS"); do
      rows+=("$("$OUT/corebench" md --server 127.0.0.1:$PORT --clients $c --files $files --server-pid "$SERVER_PID" | python3 -c "
import json, sys
r = json.load(sys.stdin)
print(*(v for ph in ('create', 'stat', 'remove') for v in (r[ph + '_per_s'], r[ph + '_cpu_us']['client'], r[ph + '_cpu_us']['server'])))")")
    done
    printf '%s\n' "${rows[@]}" | python3 -c '
import statistics, sys
rows = [[float(x) for x in l.split()] for l in sys.stdin if l.strip()]
m = [statistics.median(col) for col in zip(*rows)]
print("| %s | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f |" % (sys.argv[1], *m))' "$c"
  done
  stop
fi

# Creates against clients: what the catalog's one writer does at each
# load (its groups' size and time, from /metrics: BEGIN to the end of the
# durable COMMIT) beside the CPU every process spends per create.
if [[ " $PARTS " == *" mdcurve "* ]]; then
  rm -rf "$SCRATCH/data"; start "$(config "$SCRATCH/data" 4 1 0)"
  writer() { curl -s -H "Authorization: Bearer $STRATA_TOKEN" "http://127.0.0.1:$PORT/metrics" |
    awk '/^strata_catalog_group_operations_count/{c=$2} /^strata_catalog_group_operations_sum/{s=$2} /^strata_catalog_group_duration_seconds_sum/{d=$2} END{print c, s, d}'; }
  echo; echo "## Creates against clients (core's Unix socket; median of $REPS; corebench md --phases create)"
  echo; echo "| clients | creates/s | per group | writer µs per group | writer busy | CPU µs per create: client | server | machine |"
  echo "|---|---|---|---|---|---|---|---|"
  for c in 1 2 4 8 16 32 64; do
    files=$((8000 / c)); [ $files -lt 300 ] && files=300
    rows=()
    for r in $(seq "$REPS"); do
      read -r g0 n0 d0 < <(writer)
      j=$("$OUT/corebench" md --server 127.0.0.1:$PORT --clients $c --files $files --phases create --server-pid "$SERVER_PID")
      read -r g1 n1 d1 < <(writer)
      rows+=("$(echo "$j" | python3 -c "
import json, sys
r = json.load(sys.stdin); g = $g1 - $g0; T = ($d1 - $d0) / g
print(r['create_per_s'], ($n1 - $n0) / g, T * 1e6, r['create_per_s'] / (($n1 - $n0) / g) * T, *(r['create_cpu_us'][k] for k in ('client', 'server', 'machine')))")")
    done
    printf '%s\n' "${rows[@]}" | python3 -c '
import statistics, sys
rows = [[float(x) for x in l.split()] for l in sys.stdin if l.strip()]
m = [statistics.median(col) for col in zip(*rows)]
print("| %s | %.0f | %.1f | %.0f | %.0f%% | %.0f | %.0f | %.0f |" % (sys.argv[1], m[0], m[1], m[2], 100 * m[3], m[4], m[5], m[6]))' "$c"
  done
  stop
fi

if [[ " $PARTS " == *" md "* ]]; then
  rm -rf "$SCRATCH/data"; start "$(config "$SCRATCH/data" 4 1 0)"
  echo; echo "## 3. Metadata through the real API (ops/s, median of $REPS; corebench md)"
  echo; echo "| target | clients | create | stat | remove |"; echo "|---|---|---|---|---|"
  for c in 1 8 64; do
    files=$((c == 1 ? 4000 : c == 8 ? 3000 : 500))
    for tgt in "--server 127.0.0.1:$PORT" "--server 127.0.0.1:$PORT --tcp" "--posix $SCRATCH" "--posix $SCRATCH --sync"; do
      # over TCP at 8 clients only: it follows the socket's rows
      [[ $tgt == *--tcp && $c != 8 ]] && continue
      cr=(); st=(); rm_=()
      for r in $(seq "$REPS"); do
        j=$("$OUT/corebench" md $tgt --clients $c --files $files)
        cr+=("$(echo "$j" | python3 -c 'import json,sys;print(json.load(sys.stdin)["create_per_s"])')")
        st+=("$(echo "$j" | python3 -c 'import json,sys;print(json.load(sys.stdin)["stat_per_s"])')")
        rm_+=("$(echo "$j" | python3 -c 'import json,sys;print(json.load(sys.stdin)["remove_per_s"])')")
      done
      fstype=$(df -T "$SCRATCH" | awk 'NR==2{print $2}')
      case $tgt in
        *--sync) name="local $fstype, fsync per create (durable, like strata)";;
        --posix*) name="local $fstype, no fsync";;
        *--tcp) name="strata over loopback TCP (a client on another host takes this path)";;
        *) name="strata, a client on its host (core's Unix socket; durable: catalog fsynced per group commit)";;
      esac
      echo "| $name | $c | $(median "${cr[@]}") | $(median "${st[@]}") | $(median "${rm_[@]}") |"
    done
  done
  rm -rf "$SCRATCH"/md-*   # the local runs' empty directories
  # Where a create's CPU goes (8 clients on the core's socket), and what
  # the catalog alone sustains (the same commits from 8 goroutines, no
  # HTTP): the two bounds on the create rate of a 2-core machine.
  echo; echo "CPU per operation, µs (8 clients, core's Unix socket; median of $REPS; machine = every process incl. kernel threads; idle includes waiting for the disk):"
  echo; echo "| phase | ops/s | clients | server | machine | idle |"; echo "|---|---|---|---|---|---|"
  js=()
  for r in $(seq "$REPS"); do js+=("$("$OUT/corebench" md --server 127.0.0.1:$PORT --clients 8 --files 3000 --server-pid "$SERVER_PID")"); done
  for ph in create stat remove; do
    printf '%s\n' "${js[@]}" | python3 -c '
import json, statistics, sys
ph = sys.argv[1]
rs = [json.loads(l) for l in sys.stdin if l.strip()]
rate = statistics.median(r[ph + "_per_s"] for r in rs)
cpu = [statistics.median(r[ph + "_cpu_us"][k] for r in rs) for k in ("client", "server", "machine", "idle")]
print("| %s | %d | %.0f | %.0f | %.0f | %.0f |" % (ph, rate, *cpu))' "$ph"
  done
  stop
  echo; echo "The catalog alone (go test -bench CommitEmpty ./internal/catalog/sqlite, 8 goroutines):"; echo
  go test -run XXX -bench CommitEmpty -benchtime 40000x -count "$REPS" ./internal/catalog/sqlite | grep ns/op | sed 's/^/    /'
fi
