#!/usr/bin/env bash
# A throw-away test PKI for the TLS servers of the tests and benchmarks, made with `openssl`
# (no key material lives in the repository).
#
#   scripts/pki.sh DIR      make DIR's files if any is missing, unreadable or no longer right
#                           (idempotent: a complete, valid set is left as it is); prints DIR
#
#   DIR/ca.pem, ca.key                  the CA (CN "headroom test CA"): what clients trust
#   DIR/localhost.pem, .key             CA-signed; SAN DNS:localhost, IP:127.0.0.1, IP:::1
#   DIR/wrong-name.pem, .key            CA-signed; SAN DNS:wrong.example  (hostname mismatch)
#   DIR/expired.pem, .key               CA-signed; names as localhost; valid 2020-01-01 to
#                                       2021-01-01                        (certificate expired)
#   DIR/self-signed.pem, .key           signed by itself; names as localhost (self-signed)
#
# The same kinds as crates/headroom/tests/common/pki.rs (rcgen) makes for the Rust tests; every
# key is ECDSA P-256, so handshakes cost what a modern site's do. Keys are mode 0644 on purpose:
# servers that run as their own user (PostgreSQL, ejabberd) get copies they own; these files are
# test material, never a secret.
set -euo pipefail

say() { echo "pki.sh: $*" >&2; }
die() { say "$*"; exit 1; }

DIR=${1:-}
[ -n "$DIR" ] || { echo "usage: scripts/pki.sh DIR" >&2; exit 2; }
command -v openssl >/dev/null || die "openssl is not installed (apt-get install -y openssl)"

FILES=(ca.pem ca.key localhost.pem localhost.key wrong-name.pem wrong-name.key expired.pem
  expired.key self-signed.pem self-signed.key)

# True when every file is there and each certificate is what it should be: the good leaf verifies
# against the CA for localhost and 127.0.0.1 and stays valid for 30 more days, the CA too.
complete() {
  local f
  for f in "${FILES[@]}"; do [ -s "$DIR/$f" ] || return 1; done
  openssl x509 -in "$DIR/ca.pem" -noout -checkend 2592000 >/dev/null 2>&1 || return 1
  openssl verify -CAfile "$DIR/ca.pem" -verify_hostname localhost "$DIR/localhost.pem" \
    >/dev/null 2>&1 || return 1
  openssl verify -CAfile "$DIR/ca.pem" -verify_ip 127.0.0.1 "$DIR/localhost.pem" \
    >/dev/null 2>&1 || return 1
  openssl x509 -in "$DIR/localhost.pem" -noout -checkend 2592000 >/dev/null 2>&1 || return 1
  # The expired one must still be expired and CA-signed (its check fails for that reason alone).
  openssl verify -CAfile "$DIR/ca.pem" -no_check_time "$DIR/expired.pem" >/dev/null 2>&1 ||
    return 1
}

newkey() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }

# leaf NAME SAN CN — a CSR for a new key, signed by the CA with `openssl ca` (the only
# OpenSSL 3.0 command that takes explicit start and end dates, which the expired leaf needs).
leaf() {
  local name=$1 san=$2 cn=$3 start=$4 end=$5 tmp=$6
  newkey "$tmp/$name.key"
  openssl req -new -key "$tmp/$name.key" -subj "/O=headroom test PKI/CN=$cn" \
    -out "$tmp/$name.csr" 2>/dev/null
  cat >"$tmp/$name.ext" <<EOF
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = serverAuth
subjectAltName = $san
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
EOF
  openssl ca -batch -config "$tmp/ca.cnf" -notext -md sha256 -in "$tmp/$name.csr" \
    -out "$tmp/$name.pem" -startdate "$start" -enddate "$end" -extfile "$tmp/$name.ext" \
    >"$tmp/$name.log" 2>&1 || { cat "$tmp/$name.log" >&2; die "signing $name failed"; }
}

make_all() {
  local tmp
  tmp=$(mktemp -d "${DIR%/}.tmp.XXXXXX")
  mkdir -p "$tmp/db"
  : >"$tmp/db/index.txt"
  openssl rand -hex 16 >"$tmp/db/serial"
  cat >"$tmp/ca.cnf" <<EOF
[ ca ]
default_ca = test_ca
[ test_ca ]
dir = $tmp/db
database = \$dir/index.txt
serial = \$dir/serial
new_certs_dir = \$dir
certificate = $tmp/ca.pem
private_key = $tmp/ca.key
policy = any
unique_subject = no
copy_extensions = none
[ any ]
organizationName = optional
commonName = supplied
[ ca_ext ]
basicConstraints = critical, CA:TRUE
keyUsage = critical, keyCertSign, cRLSign, digitalSignature
subjectKeyIdentifier = hash
EOF
  newkey "$tmp/ca.key"
  openssl req -new -x509 -key "$tmp/ca.key" -subj "/O=headroom test PKI/CN=headroom test CA" \
    -days 3650 -config "$tmp/ca.cnf" -extensions ca_ext -out "$tmp/ca.pem" 2>/dev/null
  local san_local="DNS:localhost, IP:127.0.0.1, IP:::1"
  local now_minus end_ok
  now_minus=$(date -u -d '-1 day' +%Y%m%d%H%M%SZ)
  end_ok=$(date -u -d '+3649 days' +%Y%m%d%H%M%SZ)
  leaf localhost "$san_local" localhost "$now_minus" "$end_ok" "$tmp"
  leaf wrong-name "DNS:wrong.example" wrong.example "$now_minus" "$end_ok" "$tmp"
  leaf expired "$san_local" localhost 20200101000000Z 20210101000000Z "$tmp"
  # Self-signed: its own issuer, no CA in the chain.
  newkey "$tmp/self-signed.key"
  openssl req -new -x509 -key "$tmp/self-signed.key" -days 3650 \
    -subj "/O=headroom test PKI/CN=localhost" \
    -addext "subjectAltName = $san_local" -addext "extendedKeyUsage = serverAuth" \
    -out "$tmp/self-signed.pem" 2>/dev/null
  mkdir -p "$DIR"
  local f
  for f in "${FILES[@]}"; do
    chmod 644 "$tmp/$f"
    mv -f "$tmp/$f" "$DIR/$f"
  done
  chmod 755 "$DIR"
  rm -rf "$tmp"
}

if complete; then
  echo "$DIR"
  exit 0
fi
mkdir -p "$DIR"
# One maker at a time (two scripts starting at once would otherwise mix two CAs' files).
exec 9>"${DIR%/}.lock"
flock -w 60 9 || die "another pki.sh holds ${DIR%/}.lock"
if ! complete; then
  say "making a test CA and its certificates in $DIR"
  make_all
  complete || die "the files made in $DIR do not verify (see openssl's messages above)"
fi
echo "$DIR"
