# The server of one run of experiments/io-bound-postgres.yaml, rendered per run by the lab
# (server.files) into {output}/run/{port}.sh: Debian's PostgreSQL, reachable only through a Unix
# socket in {output}/run/{port}/ (no TCP port of its own: the run has one port, {port}, and the
# service below listens on it), and headroom's reference server in front of it, whose /db/read
# requests go through a pool of {pool} connections to it.
#
# The lab signals this script's whole process group (SIGTERM) and follows it and its children
# for the server's CPU and memory: the service's and the database's together, as the study
# measured its service and database host. On SIGTERM the service drains and exits first, then
# PostgreSQL is told to shut down fast (SIGINT) and waited for, so the next run's postmaster
# finds the cluster free.
set -u
PGBIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
sock="{output}/run/{port}"
AS=""
mkdir -p "$sock"
if [ "$(id -u)" = 0 ]; then chown postgres "$sock"; AS="runuser -u postgres --"; fi
$AS "$PGBIN/postgres" -D "{output}/pg/data" -p {port} -k "$sock" -c listen_addresses= \
  -c max_connections=100 -c synchronous_commit=off -c log_min_messages=fatal \
  -c logging_collector=off &
pg=$!
srv=""
stop() {
  [ -n "$srv" ] && kill -TERM "$srv" 2>/dev/null && wait "$srv"
  kill -INT "$pg" 2>/dev/null
  wait "$pg"
  exit 0
}
trap stop TERM INT
# PostgreSQL takes a second or two to accept logins; at most 30 s.
tries=0
until psql -h "$sock" -p {port} -U headroom -d postgres -Atqc 'SELECT 1' >/dev/null 2>&1; do
  if ! kill -0 "$pg" 2>/dev/null; then echo "PostgreSQL exited before it took a login" >&2; exit 1; fi
  tries=$((tries + 1))
  if [ "$tries" -ge 300 ]; then echo "PostgreSQL took no login within 30 s" >&2; stop; fi
  sleep 0.1
done
{headroom} serve --listen 127.0.0.1:{port} --arch async --runtime {runtime} --workers {workers} \
  --db "postgres://headroom:headroom@/postgres?host=$sock&port={port}" --db-pool {pool} &
srv=$!
wait "$srv"
status=$?
# The service ended on its own (not through the trap): stop the database and say how.
kill -INT "$pg" 2>/dev/null
wait "$pg"
exit "$status"
