# bench/server.sh — sourced by the bench scripts: start and stop the
# `strata serve` under test. Needs S (the binary), OUT and PORT.

SERVER_PID=
start() { # config-file
  "$S" serve --config "$1" > "$OUT/serve.log" 2>&1 &
  SERVER_PID=$!
  # Ours, not another server left on the port: ours must still be running.
  for _ in $(seq 100); do
    kill -0 "$SERVER_PID" 2>/dev/null || break
    "$S" --server 127.0.0.1:$PORT ls / >/dev/null 2>&1 && return; sleep 0.1
  done
  echo "server did not start"; cat "$OUT/serve.log"; exit 1
}
stop() { [ -n "$SERVER_PID" ] && kill "$SERVER_PID" && wait "$SERVER_PID" 2>/dev/null || true; SERVER_PID=; }
