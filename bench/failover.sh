#!/usr/bin/env bash
# bench/failover.sh — how long a standby core takes to take over, and what
# clients see meanwhile, for docs/PERFORMANCE.md ("Fail-over").
#
#   bench/failover.sh            # TRIALS=10 fail-overs, RESTARTS=3 baselines
#
# Two cores on one PostgreSQL catalog (catalog standby = true), no devices
# of their own, and a standalone mover with two devices that registers with
# whichever is active; clients name both cores in STRATA_SERVER. While a
# client loop puts, stats and gets 64 KiB files without pause, each trial
# kills the active core with SIGKILL and times, from the kill:
#   answer — the first request answered (`strata ls /`, which the client
#            retries across the cores by itself);
#   put    — the first put done (it needs the mover registered with the new
#            core: movers register every 5 s).
# The killed core is then started again and stands by for the next trial.
# The client loop counts every command that exited non-zero.
#
# Baseline from the same run: a lone core killed and started again at once
# by hand (no standby), from the kill to its first answer — the fastest a
# restart without a standby can be (a real one also waits for someone or
# something to notice).
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
bench_setup
TRIALS=${TRIALS:-10}
RESTARTS=${RESTARTS:-3}
. bench/pg.sh
HA=$SCRATCH/ha
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  pg_stop
}
trap cleanup EXIT

rm -rf "$HA"; mkdir -p "$HA"
pg_start
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$HA/secret"; chmod 600 "$HA/secret"
core_conf() { # i
  cat > "$HA/core$1.toml" <<EOF
listen = "127.0.0.1:$((7460 + 2 * $1))"
data_dir = "$HA/core$1"
secret_file = "$HA/secret"
device = []
[mover]
id = "core$1"
listen = "127.0.0.1:$((7461 + 2 * $1))"
[catalog]
driver = "postgres"
dsn = "$PGDSN"
standby = true
[library]
path = "$HA/tapes"
time_scale = "instant"
EOF
}
core_conf 0; core_conf 1
cat > "$HA/mover.toml" <<EOF
secret_file = "$HA/secret"
[mover]
id = "mover1"
listen = "127.0.0.1:7470"
core = "http://127.0.0.1:7460,http://127.0.0.1:7462"
[[device]]
id = "d0"
path = "$HA/mover/d0"
[[device]]
id = "d1"
path = "$HA/mover/d1"
EOF
declare -A CORE
start_core() { # i
  "$S" serve --config "$HA/core$1.toml" >> "$HA/core$1.log" 2>&1 &
  CORE[$1]=$!; PIDS+=("$!")
}
export STRATA_SERVER=127.0.0.1:7460,127.0.0.1:7462
ms() { python3 -c "print(round(($2-$1)*1000))"; }

start_core 0
until "$S" ls / >/dev/null 2>&1; do sleep 0.05; done
start_core 1
until grep -q "standing by" "$HA/core1.log"; do sleep 0.05; done
"$S" mover --config "$HA/mover.toml" > "$HA/mover.log" 2>&1 &
PIDS+=("$!")
until "$S" df 2>/dev/null | grep -q " d1 "; do sleep 0.1; done
"$S" mkdir -p /load
head -c 65536 /dev/urandom > "$HA/small"
head -c 1048576 /dev/urandom > "$HA/probe"

# The client loop: put, stat and get, one file after another.
(
  i=0; ok=0; bad=0
  while [ ! -f "$HA/stop" ]; do
    i=$((i + 1))
    for cmd in "put $HA/small /load/f$i" "stat /load/f$i" "get /load/f$i -"; do
      # shellcheck disable=SC2086
      if "$S" $cmd >/dev/null 2>>"$HA/load.err"; then ok=$((ok + 1)); else bad=$((bad + 1)); fi
    done
  done
  echo "$ok $bad" > "$HA/load.count"
) &
LOAD=$!

echo "# bench/failover.sh report — $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) CPUs, $(uname -r), PostgreSQL $("$PGBIN/postgres" --version | awk '{print $3}')"
echo
echo "| trial | core killed | first answer (ms) | first put (ms) |"
echo "|---|---|---|---|"
active=0; ANS=(); PUT=(); JSON=()
for t in $(seq "$TRIALS"); do
  sleep 2
  t0=$(now); kill -9 "${CORE[$active]}"; wait "${CORE[$active]}" 2>/dev/null || true
  "$S" ls / >/dev/null; t1=$(now)
  "$S" put -f "$HA/probe" /probe >/dev/null; t2=$(now)
  a=$(ms "$t0" "$t1"); p=$(ms "$t0" "$t2"); ANS+=("$a"); PUT+=("$p")
  echo "| $t | core$active | $a | $p |"
  JSON+=("{\"trial\": $t, \"answer_ms\": $a, \"put_ms\": $p}")
  start_core "$active"
  until [ "$(grep -c "standing by" "$HA/core$active.log")" -ge $((t / 2 + 1)) ]; do sleep 0.05; done
  active=$((1 - active))
done
touch "$HA/stop"; wait "$LOAD"
read -r ok bad < "$HA/load.count"

# The baseline: no standby; the active core is killed and restarted by hand.
kill "${CORE[$((1 - active))]}" 2>/dev/null || true; wait "${CORE[$((1 - active))]}" 2>/dev/null || true
REST=()
for r in $(seq "$RESTARTS"); do
  sleep 2
  t0=$(now); kill -9 "${CORE[$active]}"; wait "${CORE[$active]}" 2>/dev/null || true
  start_core "$active"
  "$S" ls / >/dev/null; t1=$(now)
  REST+=("$(ms "$t0" "$t1")")
done
echo
echo "Client loop during the $TRIALS fail-overs: $ok commands succeeded, $bad failed$( [ "$bad" -gt 0 ] && echo ": $(sort "$HA/load.err" | uniq -c | head -3 | tr '\n' ' ')")."
echo
echo "| | median (ms) | max (ms) |"
echo "|---|---|---|"
echo "| fail-over: first answer | $(median "${ANS[@]}") | $(printf '%s\n' "${ANS[@]}" | sort -n | tail -1) |"
echo "| fail-over: first put | $(median "${PUT[@]}") | $(printf '%s\n' "${PUT[@]}" | sort -n | tail -1) |"
echo "| baseline: restart by hand, first answer | $(median "${REST[@]}") | $(printf '%s\n' "${REST[@]}" | sort -n | tail -1) |"
printf '%s\n' "${JSON[@]}" | save_results failover "ok=$ok" "failed=$bad" "restart_ms=[$(IFS=,; echo "${REST[*]}")]"
