#!/usr/bin/env bash
# bench/s3.sh — the S3 gateway against the client API it is built on, for
# docs/S3.md ("Performance") and docs/PERFORMANCE.md ("Front ends").
#
#   bench/s3.sh                  # both parts; prints a Markdown report
#   PARTS=small bench/s3.sh      # only some of: seq small
#
# seq:   a SIZE_MB object put and got with the aws cli (multipart, 8
#        concurrent requests of 64 MiB parts) against `strata put` and
#        `strata get` of the same file, taking turns; the same object moved
#        the same way by bench/s3bench --big (Go, SigV4 with an unsigned
#        payload): the gateway without the aws cli's own cost; the same
#        aws cli commands against bench/s3sink, an endpoint that keeps
#        nothing and checks nothing: what the aws cli alone moves here,
#        the ceiling of any gateway's figure; the disk's own pace (dd) for
#        scale. AWS2=PATH (the aws cli v2, e.g. Debian's awscli package
#        with python3-awscrt) adds it with its CRT transfer client, which
#        connects to port 80 only (that awscrt ignores an endpoint's
#        port): the gateway then listens on 127.0.0.1:80 and the sink on
#        127.0.0.2:80. Its gets write a file in SCRATCH (it renames its
#        output into place, so /dev/null would be replaced), against
#        `strata get` into a file.
# small: OBJECTS objects of 4 KiB PUT, GET and HEAD by 16 clients through
#        the gateway (bench/s3bench, SigV4-signed) against the same
#        operations through the client API (s3bench --server).
# VERSITYGW=PATH adds versitygw's posix backend on a directory of the same
# disk (go install github.com/versity/versitygw/cmd/versitygw@v1.8.0), the
# same aws cli commands against it.
# Runs as root (to drop caches). Needs the aws cli and 4×SIZE_MB free
# under SCRATCH.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
bench_setup s3bench s3sink
REPS=${REPS:-3}
PARTS=${PARTS:-"seq small"}
SIZE_MB=${SIZE_MB:-4096}
OBJECTS=${OBJECTS:-4000}
PORT=7460
. bench/server.sh
VGW_PID= SINK_PID=
trap 'stop; for p in $VGW_PID $SINK_PID; do kill $p 2>/dev/null || true; done' EXIT
export STRATA_SERVER=127.0.0.1:$PORT
CFG=$OUT/s3.toml
AWS2=${AWS2:-}
if [ -n "$AWS2" ]; then GW=127.0.0.1:80 SINK=127.0.0.2:80; else GW=127.0.0.1:$((PORT+2)) SINK=127.0.0.1:$((PORT+4)); fi
EP=http://$GW
{ echo "listen = \"127.0.0.1:$PORT\""; echo "data_dir = \"$SCRATCH/data\""; echo 'reclaim_every = "1s"'; echo 'reclaim_grace = "0s"'
  echo "[mover]"; echo "listen = \"127.0.0.1:$((PORT+1))\""; echo "[library]"; echo "drives = 0"
  echo "[s3]"; echo "listen = \"$GW\""; } > "$CFG"

echo "# bench/s3.sh report — $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) CPUs, $(free -g | awk '/Mem/{print $2}') GiB, $(uname -r)"
echo "file system under test: $(df -T "$SCRATCH" | awk 'NR==2{print $2" on "$1}')"
rm -rf "$SCRATCH/data"; start "$CFG"
K=$("$S" s3 keys create --user root --json)
export AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_DEFAULT_REGION=us-east-1 AWS_CONFIG_FILE=$OUT/aws.config
AWS_ACCESS_KEY_ID=$(echo "$K" | python3 -c 'import json,sys; print(json.load(sys.stdin)["access_key_id"])')
AWS_SECRET_ACCESS_KEY=$(echo "$K" | python3 -c 'import json,sys; print(json.load(sys.stdin)["secret_access_key"])')
printf '[default]\ns3 =\n  max_concurrent_requests = 8\n  multipart_chunksize = 64MB\n  multipart_threshold = 64MB\n' > "$AWS_CONFIG_FILE"
AWS="aws --endpoint-url $EP"
$AWS s3 mb s3://bench >/dev/null
"$OUT/s3sink" --listen "$SINK" & SINK_PID=$!
SINKAWS="aws --endpoint-url http://$SINK"
if [ -n "$AWS2" ]; then
  printf '[default]\ns3 =\n  preferred_transfer_client = crt\n  multipart_chunksize = 64MB\n' > "$OUT/aws2.config"
  AWS2GW="env AWS_CONFIG_FILE=$OUT/aws2.config $AWS2 --endpoint-url $EP"
  AWS2SINK="env AWS_CONFIG_FILE=$OUT/aws2.config $AWS2 --endpoint-url http://$SINK"
fi
if [ -n "${VERSITYGW:-}" ]; then
  rm -rf "$SCRATCH/vgw"; mkdir -p "$SCRATCH/vgw"
  ROOT_ACCESS_KEY=$AWS_ACCESS_KEY_ID ROOT_SECRET_KEY=$AWS_SECRET_ACCESS_KEY "$VERSITYGW" --port 127.0.0.1:$((PORT+3)) posix "$SCRATCH/vgw" > "$OUT/versitygw.log" 2>&1 &
  VGW_PID=$!
  sleep 2
  VGW="aws --endpoint-url http://127.0.0.1:$((PORT+3))"
  $VGW s3 mb s3://bench >/dev/null
fi

if [[ " $PARTS " == *" seq "* ]]; then
  SRC=$SCRATCH/src.dat
  source_file "$SRC" $((SIZE_MB<<20))
  B=$((SIZE_MB<<20))
  declare -A T
  for r in $(seq "$REPS"); do
    seq_baselines "$SRC" "$B"
    # cp_pair KEY CLI DST: the aws cli CLI puts SRC (durable: a sync ends
    # the timing, for an endpoint that does not sync) and gets it back into
    # DST, MB/s into T[KEY,w] and T[KEY,r].
    cp_pair() {
      local t0 t1
      drop; cat "$SRC" > /dev/null
      t0=$(now); $2 s3 cp --only-show-errors "$SRC" s3://bench/obj; sync; t1=$(now); T[$1,w]+="$(rate $B "$t0" "$t1") "
      drop; t0=$(now); $2 s3 cp --only-show-errors s3://bench/obj "$3" > /dev/null; t1=$(now); T[$1,r]+="$(rate $B "$t0" "$t1") "
      $2 s3 rm --only-show-errors s3://bench/obj
      [ "$3" = - ] || rm -f "$3"
    }
    cp_pair s3 "$AWS" -
    cp_pair sink "$SINKAWS" -
    [ -n "${VERSITYGW:-}" ] && cp_pair vgw "$VGW" -
    if [ -n "$AWS2" ]; then
      cp_pair crt "$AWS2GW" "$SCRATCH/crt.out"
      cp_pair crtsink "$AWS2SINK" "$SCRATCH/crt.out"
      "$S" put "$SRC" /api.dat
      drop; t0=$(now); "$S" get /api.dat "$SCRATCH/get.out"; t1=$(now); T[api,rf]+="$(rate $B "$t0" "$t1") "
      "$S" rm /api.dat; rm -f "$SCRATCH/get.out"
    fi
    drop; cat "$SRC" > /dev/null
    j=$("$OUT/s3bench" --endpoint "$EP" --key "$AWS_ACCESS_KEY_ID" --secret "$AWS_SECRET_ACCESS_KEY" --bucket bench --big "$SRC" --part 64 --clients 8)
    T[s3go,w]+="$(echo "$j" | python3 -c "import json,sys;print(round(json.load(sys.stdin)['put_mb_s']))") "
    T[s3go,r]+="$(echo "$j" | python3 -c "import json,sys;print(round(json.load(sys.stdin)['get_mb_s']))") "
    $AWS s3 rm --only-show-errors s3://bench/big
    sleep 2
  done
  echo; echo "## ${SIZE_MB} MiB object: aws cli (multipart, 8 requests of 64 MiB at once) against strata put/get (MB/s, median of $REPS, taking turns)"
  echo; echo "| op | disk alone (dd) | strata put / get | aws s3 cp through the gateway | aws s3 cp to an endpoint doing nothing (s3sink) | s3bench --big through the gateway | aws cli / API | aws cli alone / API | s3bench / API |"; echo "|---|---|---|---|---|---|---|---|---|"
  for op in w r; do
    d=$(median ${T[disk,$op]}); a=$(median ${T[api,$op]}); g=$(median ${T[s3,$op]}); k=$(median ${T[sink,$op]}); b=$(median ${T[s3go,$op]})
    name=write; [ $op = r ] && name=read
    echo "| $name | $d | $a | $g | $k | $b | $(ratio "$g" "$a") | $(ratio "$k" "$a") | $(ratio "$b" "$a") |"
  done
  if [ -n "$AWS2" ]; then
    echo; echo "aws cli v2 ($($AWS2 --version 2>&1 | cut -d' ' -f1)) with its CRT transfer client, MB/s (median): write through the gateway $(median ${T[crt,w]}), to s3sink $(median ${T[crtsink,w]}) — $(ratio "$(median ${T[crt,w]})" "$(median ${T[api,w]})") and $(ratio "$(median ${T[crtsink,w]})" "$(median ${T[api,w]})") of strata put; read into a file through the gateway $(median ${T[crt,r]}), from s3sink $(median ${T[crtsink,r]}) — $(ratio "$(median ${T[crt,r]})" "$(median ${T[api,rf]})") and $(ratio "$(median ${T[crtsink,r]})" "$(median ${T[api,rf]})") of strata get into a file ($(median ${T[api,rf]}))."
  fi
  if [ -n "${VERSITYGW:-}" ]; then
    echo; echo "versitygw (posix backend, same disk), the same aws cli commands (MB/s, median): write $(median ${T[vgw,w]}) (Strata's gateway / versitygw $(ratio "$(median ${T[s3,w]})" "$(median ${T[vgw,w]})")), read $(median ${T[vgw,r]}) ($(ratio "$(median ${T[s3,r]})" "$(median ${T[vgw,r]})"))"
  fi
  echo; echo "raw: $(for k in "${!T[@]}"; do echo -n "$k: ${T[$k]}; "; done)"
  # One repetition a line: MB/s by what moved it ("s3": the aws cli
  # through the gateway, "sink": to s3sink, "crt…": the aws cli v2's CRT
  # client, "api": strata put/get, "rf": strata get into a file), ",w"
  # writes and ",r" reads.
  for i in $(seq 0 $((REPS - 1))); do
    for k in "${!T[@]}"; do a=(${T[$k]}); echo "\"$k\": ${a[$i]}"; done | paste -sd, | sed 's/^/{/; s/$/}/'
  done | save_results s3 size_mb=$SIZE_MB
fi

if [[ " $PARTS " == *" small "* ]]; then
  declare -A M
  for r in $(seq "$REPS"); do
    j=$("$OUT/s3bench" --server 127.0.0.1:$PORT --under /small$r --clients 16 --objects "$OBJECTS" --size 4096)
    for ph in put get head; do M[api,$ph]+="$(echo "$j" | python3 -c "import json,sys;print(json.load(sys.stdin)['${ph}_per_s'])") "; done
    j=$("$OUT/s3bench" --endpoint "$EP" --key "$AWS_ACCESS_KEY_ID" --secret "$AWS_SECRET_ACCESS_KEY" --bucket small$r --clients 16 --objects "$OBJECTS" --size 4096)
    for ph in put get head; do M[s3,$ph]+="$(echo "$j" | python3 -c "import json,sys;print(json.load(sys.stdin)['${ph}_per_s'])") "; done
    "$S" rm -r /small$r /s3/small$r
  done
  echo; echo "## $OBJECTS objects of 4 KiB, 16 clients: the gateway against the client API (ops/s, median of $REPS)"
  echo; echo "| op | client API (s3bench --server) | S3 through the gateway (s3bench, SigV4) | gateway / API |"; echo "|---|---|---|---|"
  for ph in put get head; do
    a=$(median ${M[api,$ph]}); g=$(median ${M[s3,$ph]})
    name=$(echo $ph | tr a-z A-Z); [ $ph = head ] && name="HEAD (API: stat)"
    echo "| $name | $a | $g | $(ratio "$g" "$a") |"
  done
  echo; echo "raw: $(for k in "${!M[@]}"; do echo -n "$k: ${M[$k]}; "; done)"
fi
