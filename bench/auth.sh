#!/usr/bin/env bash
# bench/auth.sh — what identity and access control cost, for
# docs/SECURITY.md ("What checks and encryption cost") and docs/PERFORMANCE.md ("Front ends").
#
#   bench/auth.sh               # both parts; prints a Markdown report
#   PARTS=tls bench/auth.sh     # only some of: md tls
#
# md:  metadata rates with permission checks and token verification
#      against the same operations on the build before them (BEFORE, a
#      git revision; default a6da868: what everything added since costs)
#      and against root on this build (an admin, whom no check stops: what
#      the checks cost), servers taking turns. The client is an ordinary
#      user (uid 2001, not an admin, so every check runs), over the core's
#      Unix socket (kernel credentials) and over loopback TCP (a bearer
#      token).
# tls: put and get of a SIZE_MB file over TCP, as from another host, with
#      TLS 1.3 against plain TCP, taking turns; and the baseline: what
#      crypto/tls alone moves between two processes here (bench/tlsbench:
#      the same 4 streams of 1 MiB writes), against plain TCP. Each put
#      and get is charged the CPU its client and the server used; a TLS
#      transfer does all a plain one does and also seals and opens every
#      byte (AES-128-GCM as the data channel computes it, timed alone by
#      `tlsbench aead`), so plain CPU + AES-GCM over the machine's cores is
#      the most it can move here.
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

config() { # data-dir tls: the md part's (no tls) is one the build before reads too
  local f=$OUT/auth.toml
  { echo "listen = \"127.0.0.1:$PORT\""; echo "data_dir = \"$1\""
    [ -n "$2" ] && { echo 'reclaim_every = "1s"'; echo 'reclaim_grace = "0s"'; }
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
    # before: the build before access control, the client claiming uid
    # 2001; after: this build, uid 2001 checked on every request; admin:
    # this build, root (an administrator, whom no permission stops), over
    # the socket by its credentials and over TCP with a token of its own.
    for build in before after admin; do
      bin=$OUT/strata; [ $build = before ] && bin=$OUT/strata-before
      S=$bin; rm -rf "$SCRATCH/data"; start "$(config "$SCRATCH/data" "")"
      "$S" mkdir /u; "$S" chmod 777 /u
      tok=""; [ $build = after ] && tok=$("$S" token create --user bench --uid 2001 --gid 2001 --ttl 1h 2>/dev/null)
      [ $build = admin ] && tok=$STRATA_TOKEN
      who=(as_user); [ $build = admin ] && who=()
      for tr in socket tcp; do
        flags=(); [ $tr = tcp ] && flags=(--tcp)
        j=$(STRATA_TOKEN=$tok "${who[@]}" "$OUT/corebench" md --server 127.0.0.1:$PORT "${flags[@]}" --clients 8 --files 3000 --under /u)
        for ph in create stat remove; do
          R[$build,$tr,$ph]+="$(echo "$j" | python3 -c "import json,sys;print(json.load(sys.stdin)['${ph}_per_s'])") "
        done
      done
      stop
    done
  done
  S=$OUT/strata
  echo; echo "## Metadata with permission checks and token verification (8 clients, ops/s, median of $REPS, servers taking turns)"
  echo; echo "uid 2001 (not an admin: every check runs) on this build, against the same on the build before access control ($BEFORE, which believed the uid the client claimed) and against root on this build (an admin: no permission is checked)."
  echo; echo "| path | op | before ($BEFORE) | this build, uid 2001 | / before | this build, root | uid 2001 / root |"; echo "|---|---|---|---|---|---|---|"
  for tr in socket tcp; do
    for ph in create stat remove; do
      b=$(median ${R[before,$tr,$ph]}); a=$(median ${R[after,$tr,$ph]}); m=$(median ${R[admin,$tr,$ph]})
      echo "| $tr | $ph | $b | $a | $(ratio "$a" "$b") | $m | $(ratio "$a" "$m") |"
    done
  done
  echo; echo "raw: $(for k in "${!R[@]}"; do echo -n "$k: ${R[$k]}; "; done)"
fi

if [[ " $PARTS " == *" tls "* ]]; then
  SRC=$SCRATCH/src.dat
  source_file "$SRC" $((SIZE_MB<<20))
  BYTES=$((SIZE_MB<<20))
  declare -A T C
  # op MODE OP CMD...: times CMD as T[MODE,OP] (MB/s) and adds the CPU of
  # the client (CMD and its children) and of the server as C[MODE,OP].
  op() {
    local m=$1 o=$2; shift 2
    local s0 t0 t1; s0=$(cpu_of "$SERVER_PID"); t0=$(now)
    with_cpu "$@"
    t1=$(now)
    T[$m,$o]+="$(rate $BYTES "$t0" "$t1") "
    C[$m,$o]+="$(python3 -c "print(round($CPU + $(cpu_of "$SERVER_PID") - $s0, 2))") "
  }
  for r in $(seq "$REPS"); do
    for mode in off on; do
      rm -rf "$SCRATCH/data"; start "$(config "$SCRATCH/data" $mode)"
      flags=(--tcp-only)
      [ $mode = on ] && flags+=(--server "$STRATA_SERVER" --ca "$SCRATCH/data/tls/ca.pem")
      export STRATA_TOKEN=$("$S" --server "unix:$SCRATCH/data/strata.sock" token create --user root --ttl 1h 2>/dev/null)
      drop; cat "$SRC" > /dev/null
      op $mode put "$S" "${flags[@]}" put "$SRC" /f
      drop
      op $mode get "$S" "${flags[@]}" get /f - > /dev/null
      unset STRATA_TOKEN
      stop
      for p in plain tls; do
        f=(); [ $p = tls ] && f=(-tls)
        "$OUT/tlsbench" recv -addr 127.0.0.1:7460 "${f[@]}" & rp=$!; sleep 0.3
        T[$mode,$p]+="$("$OUT/tlsbench" send -addr 127.0.0.1:7460 "${f[@]}" -bytes $BYTES -streams 4) "
        kill $rp; wait $rp 2>/dev/null || true
      done
    done
    a=$("$OUT/tlsbench" aead -bytes $BYTES)
    C[aead]+="$(echo "$a" | python3 -c "import json,sys; d=json.load(sys.stdin); print(round(d['channel_seal_s'] + d['channel_open_s'], 3))") "
    C[stdaead]+="$(echo "$a" | python3 -c "import json,sys; d=json.load(sys.stdin); print(round(d['seal_s'] + d['open_s'], 3))") "
  done
  tp=$(median ${T[off,plain]} ${T[on,plain]}); tt=$(median ${T[off,tls]} ${T[on,tls]})
  aes=$(fmedian ${C[aead]}); stdaes=$(fmedian ${C[stdaead]})
  echo; echo "## ${SIZE_MB} MiB over TCP (as from another host; 4 stripes), TLS 1.3 against plain (MB/s, median of $REPS, taking turns)"
  echo; echo "Baseline, crypto/tls alone between two processes (4 streams of 1 MiB writes): plain TCP $tp MB/s, TLS $tt MB/s ($(ratio "$tt" "$tp")×)."
  echo "AES-128-GCM alone, sealing and opening ${SIZE_MB} MiB (tlsbench aead): $aes core-seconds as the data channel does (internal/aesgcm, 256 KiB frames), $stdaes as crypto/tls does (crypto/cipher, 16 KiB records)."
  echo; echo "| op | plain | TLS | TLS / plain | TLS / crypto/tls alone | CPU plain / TLS (core-s, client + server) | most a TLS $SIZE_MB MiB can move on $(nproc) cores | that / plain | that / crypto/tls alone |"
  echo "|---|---|---|---|---|---|---|---|---|"
  for o in put get; do
    p=$(median ${T[off,$o]}); t=$(median ${T[on,$o]})
    cp=$(fmedian ${C[off,$o]})
    ct=$(fmedian ${C[on,$o]})
    # A TLS transfer does all the plain one does and seals and opens
    # every byte: on n cores it cannot move more than this.
    most=$(python3 -c "print(round($BYTES/1e6 / (($cp + $aes) / $(nproc))))")
    echo "| $o | $p | $t | $(ratio "$t" "$p") | $(ratio "$t" "$tt") | $cp / $ct | $most | $(ratio "$most" "$p") | $(ratio "$most" "$tt") |"
  done
  echo; echo "raw: $(for k in "${!T[@]}"; do echo -n "$k: ${T[$k]}; "; done)"
  echo "cpu: $(for k in "${!C[@]}"; do echo -n "$k: ${C[$k]}; "; done)"
  # One repetition a line, MB/s: put and get over plain TCP and over TLS,
  # and crypto/tls alone's plain and TLS streams, measured after each;
  # the core-seconds of each put and get (client and server), and of
  # AES-GCM alone on the same bytes.
  for i in $(seq 0 $((REPS - 1))); do
    v() { local a=(${T[$1]}); echo "${a[$i]}"; }
    c() { local a=(${C[$1]}); echo "${a[$i]}"; }
    echo "{\"put_plain\": $(v off,put), \"put_tls\": $(v on,put), \"get_plain\": $(v off,get), \"get_tls\": $(v on,get)," \
      "\"alone_plain\": [$(v off,plain), $(v on,plain)], \"alone_tls\": [$(v off,tls), $(v on,tls)]," \
      "\"cpu_s\": {\"put_plain\": $(c off,put), \"put_tls\": $(c on,put), \"get_plain\": $(c off,get), \"get_tls\": $(c on,get), \"aes_gcm\": $(c aead), \"aes_gcm_crypto_tls\": $(c stdaead)}}"
  done | save_results auth-tls size_mb=$SIZE_MB
fi
