#!/usr/bin/env bash
# A private OpenLDAP server (Debian's slapd 2.5) for the LDAP codec's tests and benchmarks.
#
#   scripts/slapd.sh start      install Debian's slapd and ldap-utils if missing, write the
#                               configuration, load the test directory if not loaded, start the
#                               server if stopped (idempotent); prints the ldap:// URL
#   scripts/slapd.sh stop       stop it (idempotent)
#   scripts/slapd.sh status     say whether it runs (exit 3 if not)
#   scripts/slapd.sh url        print the ldap:// URL, e.g. for HEADROOM_LDAP_URL
#   scripts/slapd.sh ldaps-url  print the ldaps:// URL (TLS from the first byte)
#
#   HEADROOM_LDAP_DIR       where it lives (default /tmp/headroom-ldap: slapd.conf, db/, tls/,
#                           slapd.log, slapd.pid)
#   HEADROOM_LDAP_PORT      plain LDAP port, StartTLS offered there (default 25389)
#   HEADROOM_LDAPS_PORT     LDAP over TLS port (default 25636)
#   HEADROOM_LDAP_LOGLEVEL  slapd's loglevel (default "none": logging every operation costs a
#                           load test; "stats" logs connections and operations to slapd.log)
#   HEADROOM_PKI_DIR        the test PKI the server's certificate comes from (default
#                           /tmp/headroom-pki; made by scripts/pki.sh when missing)
#
# The directory: suffix dc=headroom,dc=test in an mdb database, root DN
# cn=admin,dc=headroom,dc=test with password "headroom", and under ou=people 1,000 inetOrgPerson
# entries uid=user1 .. uid=user1000 (cn "user N", sn "N", mail userN@headroom.test,
# userPassword "passN", so each can bind as itself). Size and time limits are unlimited for
# everyone (a subtree search returns all 1,002 entries). Tests that add entries delete them
# again; `rm -rf $HEADROOM_LDAP_DIR` after a stop starts from a fresh load.
#
# The monitor backend is on: cn=Monitor, readable by the root DN only. Its
# cn=Operations,cn=Monitor subtree counts the operations the server took
# (monitorOpInitiated / monitorOpCompleted, per operation in cn=Bind, cn=Search, cn=Add,
# cn=Modify, cn=Delete, ..., cn=Operations,cn=Monitor), which is how a test checks that the
# server saw exactly the operations a client claims it sent:
#   ldapsearch -x -H ldap://127.0.0.1:25389 -D cn=admin,dc=headroom,dc=test -w headroom \
#     -b cn=Operations,cn=Monitor -s one monitorOpInitiated monitorOpCompleted
#
# TLS with $HEADROOM_PKI_DIR/localhost.pem (names localhost, 127.0.0.1, ::1; signed by the test
# CA, $HEADROOM_PKI_DIR/ca.pem): StartTLS on the plain port, and ldaps on HEADROOM_LDAPS_PORT.
#   LDAPTLS_CACERT=/tmp/headroom-pki/ca.pem ldapwhoami -ZZ -x -H ldap://127.0.0.1:25389
# (by address: libldap checks the name it resolved back, and /etc/hosts may map 127.0.0.1 to
# another name first)
#
# The server is its own: slapd.conf (not cn=config) and data under $HEADROOM_LDAP_DIR, listening
# on 127.0.0.1 only; Debian's system slapd (port 389, /etc/ldap/slapd.d) is neither used nor
# touched. As root, slapd runs as the "openldap" OS user, which owns the data.
set -euo pipefail

DIR=${HEADROOM_LDAP_DIR:-/tmp/headroom-ldap}
PORT=${HEADROOM_LDAP_PORT:-25389}
TLS_PORT=${HEADROOM_LDAPS_PORT:-25636}
LOGLEVEL=${HEADROOM_LDAP_LOGLEVEL:-none}
PKI_DIR=${HEADROOM_PKI_DIR:-/tmp/headroom-pki}
SCRIPTS=$(cd "$(dirname "$0")" && pwd)
SUFFIX="dc=headroom,dc=test"
ROOTDN="cn=admin,$SUFFIX"
ROOTPW=headroom
USERS=1000
CONF="$DIR/slapd.conf"
PIDFILE="$DIR/slapd.pid"
LOG="$DIR/slapd.log"
# Bumped when the loaded data changes, so an old directory is loaded again.
LOAD_MARK="$DIR/db/headroom-loaded-v1-$USERS"

say() { echo "slapd.sh: $*" >&2; }
die() { say "$*"; exit 1; }

url() { echo "ldap://127.0.0.1:$PORT"; }
ldaps_url() { echo "ldaps://127.0.0.1:$TLS_PORT"; }

install_slapd() {
  if [ -x /usr/sbin/slapd ] && command -v ldapsearch >/dev/null && command -v slapadd >/dev/null
  then
    return 0
  fi
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  say "installing Debian's slapd and ldap-utils"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq slapd ldap-utils >/dev/null
  [ -x /usr/sbin/slapd ] || die "slapd installed, but no /usr/sbin/slapd"
}

owner() { if [ "$(id -u)" -eq 0 ]; then echo openldap; else id -un; fi; }

# Run as the data's owner: "openldap" when we are root, ourselves otherwise.
as_owner() {
  if [ "$(id -u)" -eq 0 ]; then
    runuser -u openldap -- "$@"
  else
    "$@"
  fi
}

pid() { [ -s "$PIDFILE" ] && cat "$PIDFILE"; }

running() {
  local p
  p=$(pid) || return 1
  [ -n "$p" ] && kill -0 "$p" 2>/dev/null && [ "$(cat "/proc/$p/comm" 2>/dev/null)" = slapd ]
}

# Writes slapd.conf; returns 0 when it changed (or is new).
write_conf() {
  local tmp="$CONF.new"
  cat >"$tmp" <<EOF
# Written by scripts/slapd.sh: edits are overwritten on the next start.
include /etc/ldap/schema/core.schema
include /etc/ldap/schema/cosine.schema
include /etc/ldap/schema/inetorgperson.schema

pidfile $PIDFILE
argsfile $DIR/slapd.args
logfile $LOG
loglevel $LOGLEVEL
modulepath /usr/lib/ldap
moduleload back_mdb

# Unlimited for everyone: the tests and load runs read whole subtrees.
sizelimit unlimited
timelimit unlimited
# Thousands of load-test connections may stay idle between operations.
idletimeout 0

TLSCACertificateFile $DIR/tls/ca.pem
TLSCertificateFile $DIR/tls/localhost.pem
TLSCertificateKeyFile $DIR/tls/localhost.key

database mdb
suffix "$SUFFIX"
rootdn "$ROOTDN"
rootpw $ROOTPW
directory $DIR/db
maxsize 1073741824
# Test data: no fsync per write (a crash loses the last writes, never the database).
dbnosync
limits * size=unlimited time=unlimited
index objectClass eq
index uid eq
index cn eq,sub
access to attrs=userPassword by self =xw by anonymous auth by * none
access to * by * read

database monitor
access to dn.subtree="cn=Monitor" by dn.exact="$ROOTDN" read by * none
EOF
  if cmp -s "$tmp" "$CONF"; then
    rm -f "$tmp"
    return 1
  fi
  mv -f "$tmp" "$CONF"
  return 0
}

# The LDIF of the test directory.
users_ldif() {
  cat <<EOF
dn: $SUFFIX
objectClass: dcObject
objectClass: organization
dc: headroom
o: headroom

dn: ou=people,$SUFFIX
objectClass: organizationalUnit
ou: people

EOF
  seq 1 "$USERS" | awk -v suffix="$SUFFIX" '{
    printf "dn: uid=user%d,ou=people,%s\nobjectClass: inetOrgPerson\nuid: user%d\n", $1, suffix, $1
    printf "cn: user %d\nsn: %d\nmail: user%d@headroom.test\nuserPassword: pass%d\n\n", $1, $1, $1, $1
  }'
}

prepare() {
  local own
  own=$(owner)
  mkdir -p "$DIR" "$DIR/db" "$DIR/tls"
  chmod 755 "$DIR"
  "$SCRIPTS/pki.sh" "$PKI_DIR" >/dev/null
  local f
  for f in ca.pem localhost.pem localhost.key; do
    cmp -s "$PKI_DIR/$f" "$DIR/tls/$f" || cp "$PKI_DIR/$f" "$DIR/tls/$f"
  done
  chmod 600 "$DIR/tls/localhost.key"
  chown -R "$own": "$DIR" 2>/dev/null || true
  as_owner test -w "$DIR/db" ||
    die "$own cannot write to $DIR/db (every parent directory must be searchable by $own); set HEADROOM_LDAP_DIR, e.g. under /tmp"
  local changed=false
  write_conf && changed=true
  chown "$own": "$CONF" 2>/dev/null || true
  if [ ! -f "$LOAD_MARK" ]; then
    running && stop
    say "loading $SUFFIX with $USERS users into $DIR/db"
    rm -rf "$DIR/db"
    mkdir -p "$DIR/db"
    chown "$own": "$DIR/db" 2>/dev/null || true
    users_ldif >"$DIR/load.ldif"
    as_owner /usr/sbin/slapadd -q -f "$CONF" -b "$SUFFIX" -l "$DIR/load.ldif" >"$DIR/slapadd.log" 2>&1 ||
      { tail -n 20 "$DIR/slapadd.log" >&2; die "slapadd failed (log above)"; }
    rm -f "$DIR/load.ldif"
    as_owner touch "$LOAD_MARK"
  elif $changed && running; then
    say "the configuration changed: restarting"
    stop
  fi
}

start() {
  install_slapd
  prepare
  if running; then
    say "already running on 127.0.0.1:$PORT (pid $(pid))"
  else
    say "starting on $(url) and $(ldaps_url) (log: $LOG)"
    : >"$LOG"
    chown "$(owner)": "$LOG" 2>/dev/null || true
    local user_args=()
    [ "$(id -u)" -eq 0 ] && user_args=(-u openldap -g openldap)
    /usr/sbin/slapd -f "$CONF" -h "ldap://127.0.0.1:$PORT/ ldaps://127.0.0.1:$TLS_PORT/" \
      "${user_args[@]}" >"$DIR/slapd.out" 2>&1 ||
      {
        cat "$DIR/slapd.out" >&2
        tail -n 20 "$LOG" >&2 || true
        die "slapd did not start (messages above)"
      }
    local i
    for i in $(seq 1 100); do
      ldapwhoami -x -H "$(url)" >/dev/null 2>&1 && break
      if [ "$i" -eq 100 ] || { [ "$i" -gt 10 ] && ! running; }; then
        cat "$DIR/slapd.out" >&2 || true
        tail -n 20 "$LOG" >&2 || true
        if grep -q "Address already in use" "$LOG" "$DIR/slapd.out" 2>/dev/null; then
          die "port $PORT or $TLS_PORT on 127.0.0.1 is taken; set HEADROOM_LDAP_PORT / HEADROOM_LDAPS_PORT"
        fi
        die "slapd does not answer on $(url) (messages above)"
      fi
      sleep 0.1
    done
  fi
  check
  url
}

# The loaded directory is there, the root DN binds, StartTLS works with the test CA.
check() {
  local n
  n=$(ldapsearch -x -LLL -H "$(url)" -D "$ROOTDN" -w "$ROOTPW" -b "ou=people,$SUFFIX" \
    "(&(objectClass=inetOrgPerson)(uid=user*))" 1.1 | grep -c '^dn:' || true)
  [ "$n" = "$USERS" ] ||
    die "ou=people,$SUFFIX holds $n users named user*, not $USERS: stop, remove $DIR, start again"
  LDAPTLS_CACERT="$PKI_DIR/ca.pem" ldapwhoami -ZZ -x -H "$(url)" >/dev/null ||
    die "StartTLS with the test CA failed on $(url)"
}

stop() {
  if running; then
    local p
    p=$(pid)
    say "stopping slapd (pid $p)"
    kill -INT "$p"
    local i
    for i in $(seq 1 300); do
      kill -0 "$p" 2>/dev/null || return 0
      sleep 0.1
    done
    die "slapd (pid $p) did not stop within 30 s"
  else
    say "not running"
  fi
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status)
    if running; then say "running on $(url) and $(ldaps_url) (pid $(pid))"; else say "not running"; exit 3; fi ;;
  url) url ;;
  ldaps-url) ldaps_url ;;
  *) echo "usage: scripts/slapd.sh start|stop|status|url|ldaps-url  (HEADROOM_LDAP_DIR, HEADROOM_LDAP_PORT, HEADROOM_LDAPS_PORT)" >&2; exit 2 ;;
esac
