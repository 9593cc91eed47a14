# bench/pg.sh — sourced by the bench scripts that need PostgreSQL: a
# throwaway cluster of the machine's Debian package (installed when
# missing) in $SCRATCH/pg, trusted for user strata, reached over its Unix
# socket there. Needs SCRATCH.

PGBIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
[ -n "$PGBIN" ] && [ -x "$PGBIN/postgres" ] || { apt-get update -qq && apt-get install -y -qq postgresql >/dev/null; PGBIN=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1); }
PGDIR=$SCRATCH/pg
# PGDSN is what [catalog] dsn takes to reach it.
PGDSN="host=$PGDIR port=5432 user=strata dbname=postgres"
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
pg_start() {
  rm -rf "$PGDIR"; mkdir -p "$PGDIR"; [ "$(id -u)" = 0 ] && chown postgres: "$PGDIR"
  as_pg "$PGBIN/initdb" -D "$PGDIR/data" -A trust -U strata -E UTF8 >/dev/null
  as_pg "$PGBIN/pg_ctl" -D "$PGDIR/data" -l "$PGDIR/log" -w \
    -o "-k $PGDIR -p 5432 -c listen_addresses= -c shared_buffers=256MB" start >/dev/null
}
pg_stop() { [ -d "$PGDIR/data" ] && as_pg "$PGBIN/pg_ctl" -D "$PGDIR/data" -m fast -w stop >/dev/null 2>&1 || true; }
