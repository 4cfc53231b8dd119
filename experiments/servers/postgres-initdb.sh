# The private PostgreSQL cluster of experiments/postgres.yaml and io-bound-postgres.yaml,
# rendered by the lab (server.files) into {output}/pg-initdb.sh and run as their before_run:
# initialised once under {output}/pg/data (user headroom, password headroom; trust over the Unix
# socket, SCRAM over TCP), nothing to do when it exists. PostgreSQL refuses to run as root: as
# root the cluster belongs to, and runs as, the postgres user.
set -e
PGBIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
if [ ! -x "$PGBIN/initdb" ]; then
  echo "no /usr/lib/postgresql/*/bin/initdb: install Debian's package postgresql" >&2
  exit 1
fi
[ -f "{output}/pg/data/PG_VERSION" ] && exit 0
mkdir -p "{output}/pg"
printf 'headroom\n' > "{output}/pg/pw"
AS=""
if [ "$(id -u)" = 0 ]; then chown -R postgres "{output}/pg"; AS="runuser -u postgres --"; fi
if ! $AS "$PGBIN/initdb" -D "{output}/pg/data" -U headroom --pwfile="{output}/pg/pw" -E UTF8 \
  --no-locale --auth-local=trust --auth-host=scram-sha-256 > "{output}/pg/initdb.log" 2>&1; then
  cat "{output}/pg/initdb.log" >&2
  exit 1
fi
