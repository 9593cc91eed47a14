# bench/server.sh — sourced by the bench scripts: start and stop the
# `strata serve` under test. Needs S (the binary), OUT and PORT.

SERVER_PID=
start() { # config-file
  "$S" serve --config "$1" > "$OUT/serve.log" 2>&1 &
  SERVER_PID=$!
  # Ours, not another server left on the port: ours must still be running.
  # A server speaking TLS is asked over TLS, with the CA it made; either
  # way the client moves to the core's Unix socket, where root needs no
  # token.
  local data ca
  data="$(sed -n 's/^data_dir = "\(.*\)"$/\1/p' "$1")"; ca=$data/tls/ca.pem
  for _ in $(seq 100); do
    kill -0 "$SERVER_PID" 2>/dev/null || break
    if "$S" --server 127.0.0.1:$PORT ls / >/dev/null 2>&1 || { [ -f "$ca" ] && "$S" --server https://127.0.0.1:$PORT --ca "$ca" ls / >/dev/null 2>&1; }; then
      # Runs over TCP (--tcp-only, corebench --tcp) authenticate as root
      # with a token made over the socket (a build without tokens makes
      # none and needs none).
      export STRATA_TOKEN
      STRATA_TOKEN=$("$S" --server "unix:$data/strata.sock" token create --user root --ttl 1d 2>/dev/null || true)
      return
    fi
    sleep 0.1
  done
  echo "server did not start"; cat "$OUT/serve.log"; exit 1
}
stop() { [ -n "$SERVER_PID" ] && kill "$SERVER_PID" && wait "$SERVER_PID" 2>/dev/null || true; SERVER_PID=; }
