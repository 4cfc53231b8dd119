#!/usr/bin/env bash
# Records the LDAP test vectors of src/ldap/tests.rs: OpenLDAP's own clients (ldap-utils 2.5)
# talking to scripts/slapd.sh's server through record_proxy.py, both directions saved as
# NAME.client.bin / NAME.server.bin. The client side is what our encoders must produce byte for
# byte; the server side is what the decoder is tested on. Run with the server started:
#   scripts/slapd.sh start && crates/headroom-proto/src/ldap/testdata/record.sh
# (the write session adds, renames and deletes uid=probe,ou=people: it leaves no trace).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
UP=${HEADROOM_LDAP_PORT:-25389}
P=${RECORD_PORT:-25390}
URL="ldap://127.0.0.1:$P"
BASE="ou=people,dc=headroom,dc=test"
ADMIN=(-x -H "$URL" -D cn=admin,dc=headroom,dc=test -w headroom)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

rec() {
  local name=$1
  shift
  python3 "$HERE/record_proxy.py" "$P" "$UP" "$HERE/$name" &
  local proxy=$!
  sleep 0.3
  "$@" >/dev/null 2>&1 || true
  wait "$proxy"
  echo "recorded $name: $(stat -c %s "$HERE/$name.client.bin") bytes sent, $(stat -c %s "$HERE/$name.server.bin") received"
}

# Bind as the root DN; a subtree search with a filter and two attributes (112 entries:
# user1, user10-19, user100-199, user1000); unbind.
rec search_sub ldapsearch "${ADMIN[@]}" -b "$BASE" -s sub \
  "(&(objectClass=inetOrgPerson)(uid=user1*))" cn mail

# Every search field away from its default: one level, deref always, size limit 10, time
# limit 7, types only; one entry.
rec search_fields ldapsearch "${ADMIN[@]}" -b "$BASE" -s one -a always -z 10 -l 7 -A \
  "(uid=user7)" sn

# A size limit the result exceeds: 5 entries, then sizeLimitExceeded (4).
rec search_sizelimit ldapsearch "${ADMIN[@]}" -b "$BASE" -z 5 "(uid=*)" 1.1

# A wrong password: invalidCredentials (49).
rec bind_wrong ldapwhoami -x -H "$URL" -D "uid=user1,$BASE" -w wrong

# Filters, each its own search on one connection (ldapsearch -f): RFC 4515
# section 4's examples, then the other filter types. No entry matches most; what matters is
# how OpenLDAP's client encodes them.
cat >"$TMP/filters" <<'FILTERS'
(cn=Babs Jensen)
(!(cn=Tim Howes))
(&(objectClass=Person)(|(sn=Jensen)(cn=Babs J*)))
(o=univ*of*mich*)
(seeAlso=)
(cn:caseExactMatch:=Fred Flintstone)
(cn:=Betty Rubble)
(sn:dn:2.4.6.8.10:=Barney Rubble)
(o:dn:=Ace Industry)
(:1.2.3:=Wilma Flintstone)
(:DN:2.4.6.8.10:=Dino)
(o=Parens R Us \28for all your parenthetical needs\29)
(cn=*\2A*)
(filename=C:\5cMyFile)
(bin=\00\00\00\04)
(sn=Lu\c4\8di\c4\87)
(1.3.6.1.4.1.1466.0=\04\02\48\69)
(&(cn=a*b*n)(dc=pablo-desktop))
(cn>=user 9)
(cn<=user 10)
(cn~=user)
(cn=*)
(cn=*user 1)
(cn;lang-en=x)
FILTERS
# ldapsearch takes its pattern argument for a filter only if it starts with "(" or holds "=":
# the lines go in without their outer parentheses, the pattern puts them back.
sed 's/^(\(.*\))$/\1/' "$TMP/filters" >"$TMP/filters.inner"
rec filters ldapsearch "${ADMIN[@]}" -b "$BASE" -s base -f "$TMP/filters.inner" "(%s)" 1.1

# A write session (ldapmodify -c goes on after errors): add (success), the same add again
# (entryAlreadyExists, 68), modify with replace/add/delete, rename (modrdn), delete (success),
# delete again (noSuchObject, 32).
cat >"$TMP/changes" <<'LDIF'
dn: uid=probe,ou=people,dc=headroom,dc=test
changetype: add
objectClass: inetOrgPerson
uid: probe
cn: probe
sn: probe
mail: probe@headroom.test

dn: uid=probe,ou=people,dc=headroom,dc=test
changetype: add
objectClass: inetOrgPerson
uid: probe
cn: probe
sn: probe
mail: probe@headroom.test

dn: uid=probe,ou=people,dc=headroom,dc=test
changetype: modify
replace: mail
mail: probe2@headroom.test
-
add: description
description: one
description: two
-
delete: description
description: one
-

dn: uid=probe,ou=people,dc=headroom,dc=test
changetype: modrdn
newrdn: uid=probe2
deleteoldrdn: 1

dn: uid=probe2,ou=people,dc=headroom,dc=test
changetype: delete

dn: uid=probe2,ou=people,dc=headroom,dc=test
changetype: delete
LDIF
rec write ldapmodify "${ADMIN[@]}" -c -f "$TMP/changes"

# Compare: compareTrue (6), then compareFalse (5) on a second connection.
rec compare_true ldapcompare "${ADMIN[@]}" "uid=user1,$BASE" "sn:1"
rec compare_false ldapcompare "${ADMIN[@]}" "uid=user1,$BASE" "sn:2"

# Extended operations: Who am I? (a response value), and StartTLS (the server's bytes after
# its ExtendedResponse are the TLS handshake).
rec whoami ldapwhoami "${ADMIN[@]}"
rec starttls env LDAPTLS_CACERT=/tmp/headroom-pki/ca.pem ldapwhoami -ZZ -x -H "$URL"
