#!/usr/bin/env bash
# bench/s3.sh — the S3 gateway against the client API it is built on, for
# docs/PERFORMANCE.md ("S3 gateway").
#
#   bench/s3.sh                  # both parts; prints a Markdown report
#   PARTS=small bench/s3.sh      # only some of: seq small
#
# seq:   a SIZE_MB object put and got with the aws cli (multipart, 8
#        concurrent requests of 64 MiB parts) against `strata put` and
#        `strata get` of the same file, taking turns; the same object moved
#        the same way by bench/s3bench --big (Go, SigV4 with an unsigned
#        payload): the gateway without the aws cli's own cost; the disk's
#        own pace (dd) for scale.
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
bench_setup s3bench
REPS=${REPS:-3}
PARTS=${PARTS:-"seq small"}
SIZE_MB=${SIZE_MB:-4096}
OBJECTS=${OBJECTS:-4000}
PORT=7460
. bench/server.sh
VGW_PID=
trap 'stop; [ -n "$VGW_PID" ] && kill $VGW_PID 2>/dev/null || true' EXIT
export STRATA_SERVER=127.0.0.1:$PORT
CFG=$OUT/s3.toml
{ echo "listen = \"127.0.0.1:$PORT\""; echo "data_dir = \"$SCRATCH/data\""; echo 'reclaim_every = "1s"'; echo 'reclaim_grace = "0s"'
  echo "[mover]"; echo "listen = \"127.0.0.1:$((PORT+1))\""; echo "[library]"; echo "drives = 0"
  echo "[s3]"; echo "listen = \"127.0.0.1:$((PORT+2))\""; } > "$CFG"
EP=http://127.0.0.1:$((PORT+2))

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
    drop; cat "$SRC" > /dev/null
    t0=$(now); $AWS s3 cp --only-show-errors "$SRC" s3://bench/obj; t1=$(now); T[s3,w]+="$(rate $B "$t0" "$t1") "
    drop; t0=$(now); $AWS s3 cp --only-show-errors s3://bench/obj - > /dev/null; t1=$(now); T[s3,r]+="$(rate $B "$t0" "$t1") "
    $AWS s3 rm --only-show-errors s3://bench/obj
    if [ -n "${VERSITYGW:-}" ]; then
      drop; cat "$SRC" > /dev/null
      t0=$(now); $VGW s3 cp --only-show-errors "$SRC" s3://bench/obj; sync; t1=$(now); T[vgw,w]+="$(rate $B "$t0" "$t1") "
      drop; t0=$(now); $VGW s3 cp --only-show-errors s3://bench/obj - > /dev/null; t1=$(now); T[vgw,r]+="$(rate $B "$t0" "$t1") "
      $VGW s3 rm --only-show-errors s3://bench/obj
    fi
    drop; cat "$SRC" > /dev/null
    j=$("$OUT/s3bench" --endpoint "$EP" --key "$AWS_ACCESS_KEY_ID" --secret "$AWS_SECRET_ACCESS_KEY" --bucket bench --big "$SRC" --part 64 --clients 8)
    T[s3go,w]+="$(echo "$j" | python3 -c "import json,sys;print(round(json.load(sys.stdin)['put_mb_s']))") "
    T[s3go,r]+="$(echo "$j" | python3 -c "import json,sys;print(round(json.load(sys.stdin)['get_mb_s']))") "
    $AWS s3 rm --only-show-errors s3://bench/big
    sleep 2
  done
  echo; echo "## ${SIZE_MB} MiB object: aws cli (multipart, 8 requests of 64 MiB at once) against strata put/get (MB/s, median of $REPS, taking turns)"
  echo; echo "| op | disk alone (dd) | strata put / get | aws s3 cp through the gateway | s3bench --big through the gateway | aws cli / API | s3bench / API |"; echo "|---|---|---|---|---|---|---|"
  for op in w r; do
    d=$(median ${T[disk,$op]}); a=$(median ${T[api,$op]}); g=$(median ${T[s3,$op]}); b=$(median ${T[s3go,$op]})
    name=write; [ $op = r ] && name=read
    echo "| $name | $d | $a | $g | $b | $(ratio "$g" "$a") | $(ratio "$b" "$a") |"
  done
  if [ -n "${VERSITYGW:-}" ]; then
    echo; echo "versitygw (posix backend, same disk), the same aws cli commands (MB/s, median): write $(median ${T[vgw,w]}) (Strata's gateway / versitygw $(ratio "$(median ${T[s3,w]})" "$(median ${T[vgw,w]})")), read $(median ${T[vgw,r]}) ($(ratio "$(median ${T[s3,r]})" "$(median ${T[vgw,r]})"))"
  fi
  echo; echo "raw: $(for k in "${!T[@]}"; do echo -n "$k: ${T[$k]}; "; done)"
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
