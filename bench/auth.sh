#!/usr/bin/env bash
# bench/auth.sh — what identity and access control cost, for
# docs/PERFORMANCE.md ("Security").
#
#   bench/auth.sh               # both parts; prints a Markdown report
#   PARTS=tls bench/auth.sh     # only some of: md tls
#
# md:  metadata rates with permission checks and token verification
#      against the same operations on the build before them (BEFORE, a
#      git revision; default a6da868), servers taking turns. The client is
#      an ordinary user (uid 2001, not an admin, so every check runs),
#      over the core's Unix socket (kernel credentials) and over loopback
#      TCP (a bearer token).
# tls: put and get of a SIZE_MB file over TCP, as from another host, with
#      TLS 1.3 against plain TCP, taking turns; and the baseline: what
#      crypto/tls alone moves between two processes here (bench/tlsbench:
#      the same 4 streams of 1 MiB writes), against plain TCP.
# Runs as root (to drop caches, and to run the client as another user).
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
bench_setup corebench tlsbench
REPS=${REPS:-3}
PARTS=${PARTS:-"md tls"}
SIZE_MB=${SIZE_MB:-4096}
BEFORE=${BEFORE:-a6da868}
chmod 755 "$OUT" "$SCRATCH"
PORT=7450
. bench/server.sh
trap stop EXIT
export STRATA_SERVER=127.0.0.1:$PORT
as_user() { setpriv --reuid 2001 --regid 2001 --clear-groups "$@"; }

config() { # data-dir tls
  local f=$OUT/auth.toml
  { echo "listen = \"127.0.0.1:$PORT\""; echo "data_dir = \"$1\""; echo 'reclaim_every = "1s"'; echo 'reclaim_grace = "0s"'
    echo "[mover]"; echo "listen = \"127.0.0.1:$((PORT+1))\""
    [ -n "$2" ] && { echo "[tls]"; echo "enabled = \"$2\""; }
    echo "[library]"; echo "drives = 0"
  } > "$f"; echo "$f"
}

echo "# bench/auth.sh report — $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) CPUs, $(free -g | awk '/Mem/{print $2}') GiB, $(uname -r)"

if [[ " $PARTS " == *" md "* ]]; then
  rm -rf "$OUT/before"; git worktree add -q --detach "$OUT/before" "$BEFORE" 2>/dev/null || git -C "$OUT/before" checkout -q "$BEFORE"
  (cd "$OUT/before" && go build -o "$OUT/strata-before" ./cmd/strata)
  git worktree remove --force "$OUT/before"
  declare -A R
  for r in $(seq "$REPS"); do
    for build in before after; do
      bin=$OUT/strata; [ $build = before ] && bin=$OUT/strata-before
      S=$bin; rm -rf "$SCRATCH/data"; start "$(config "$SCRATCH/data" "")"
      "$S" mkdir /u; "$S" chmod 777 /u
      tok=""; [ $build = after ] && tok=$("$S" token create --user bench --uid 2001 --gid 2001 --ttl 1h 2>/dev/null)
      for tr in socket tcp; do
        flags=(); [ $tr = tcp ] && flags=(--tcp)
        j=$(STRATA_TOKEN=$tok as_user "$OUT/corebench" md --server 127.0.0.1:$PORT "${flags[@]}" --clients 8 --files 3000 --under /u)
        for ph in create stat remove; do
          R[$build,$tr,$ph]+="$(echo "$j" | python3 -c "import json,sys;print(json.load(sys.stdin)['${ph}_per_s'])") "
        done
      done
      stop
    done
  done
  S=$OUT/strata
  echo; echo "## Metadata with permission checks and token verification (8 clients as uid 2001, ops/s, median of $REPS, builds taking turns)"
  echo; echo "| path | op | before ($BEFORE) | after | after / before |"; echo "|---|---|---|---|---|"
  for tr in socket tcp; do
    for ph in create stat remove; do
      b=$(median ${R[before,$tr,$ph]}); a=$(median ${R[after,$tr,$ph]})
      echo "| $tr | $ph | $b | $a | $(ratio "$a" "$b") |"
    done
  done
  echo; echo "raw: $(for k in "${!R[@]}"; do echo -n "$k: ${R[$k]}; "; done)"
fi

if [[ " $PARTS " == *" tls "* ]]; then
  SRC=$SCRATCH/src.dat
  if [ ! -f "$SRC" ] || [ "$(stat -c %s "$SRC")" != $((SIZE_MB<<20)) ]; then
    head -c $((SIZE_MB<<20)) /dev/urandom > "$SRC"; sync
  fi
  BYTES=$((SIZE_MB<<20))
  declare -A T
  for r in $(seq "$REPS"); do
    for mode in off on; do
      rm -rf "$SCRATCH/data"; start "$(config "$SCRATCH/data" $mode)"
      flags=(--tcp-only)
      [ $mode = on ] && flags+=(--server "$STRATA_SERVER" --ca "$SCRATCH/data/tls/ca.pem")
      export STRATA_TOKEN=$("$S" --server "unix:$SCRATCH/data/strata.sock" token create --user root --ttl 1h 2>/dev/null)
      drop; cat "$SRC" > /dev/null
      t0=$(now); "$S" "${flags[@]}" put "$SRC" /f; t1=$(now); T[$mode,put]+="$(rate $BYTES "$t0" "$t1") "
      drop; t0=$(now); "$S" "${flags[@]}" get /f - > /dev/null; t1=$(now); T[$mode,get]+="$(rate $BYTES "$t0" "$t1") "
      unset STRATA_TOKEN
      stop
      for p in plain tls; do
        f=(); [ $p = tls ] && f=(-tls)
        "$OUT/tlsbench" recv -addr 127.0.0.1:7460 "${f[@]}" & rp=$!; sleep 0.3
        T[$mode,$p]+="$("$OUT/tlsbench" send -addr 127.0.0.1:7460 "${f[@]}" -bytes $BYTES -streams 4) "
        kill $rp; wait $rp 2>/dev/null || true
      done
    done
  done
  tp=$(median ${T[off,plain]} ${T[on,plain]}); tt=$(median ${T[off,tls]} ${T[on,tls]})
  echo; echo "## ${SIZE_MB} MiB over TCP (as from another host; 4 stripes), TLS 1.3 against plain (MB/s, median of $REPS, taking turns)"
  echo; echo "Baseline, crypto/tls alone between two processes (4 streams of 1 MiB writes): plain TCP $tp MB/s, TLS $tt MB/s ($(ratio "$tt" "$tp")×)."
  echo; echo "| op | plain | TLS | TLS / plain | TLS / crypto/tls alone |"; echo "|---|---|---|---|---|"
  for op in put get; do
    p=$(median ${T[off,$op]}); t=$(median ${T[on,$op]})
    echo "| $op | $p | $t | $(ratio "$t" "$p") | $(ratio "$t" "$tt") |"
  done
  echo; echo "raw: $(for k in "${!T[@]}"; do echo -n "$k: ${T[$k]}; "; done)"
  # One repetition a line, MB/s: put and get over plain TCP and over TLS,
  # and crypto/tls alone's plain and TLS streams, measured after each.
  for i in $(seq 0 $((REPS - 1))); do
    v() { local a=(${T[$1]}); echo "${a[$i]}"; }
    echo "{\"put_plain\": $(v off,put), \"put_tls\": $(v on,put), \"get_plain\": $(v off,get), \"get_tls\": $(v on,get)," \
      "\"alone_plain\": [$(v off,plain), $(v on,plain)], \"alone_tls\": [$(v off,tls), $(v on,tls)]}"
  done | save_results auth-tls size_mb=$SIZE_MB
fi
