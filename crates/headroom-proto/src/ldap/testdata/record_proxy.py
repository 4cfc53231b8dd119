#!/usr/bin/env python3
"""A recording TCP proxy for the LDAP codec's test vectors (no tcpdump needed).

    record_proxy.py LISTEN_PORT UPSTREAM_PORT OUT_PREFIX

Listens on 127.0.0.1:LISTEN_PORT, takes ONE connection, forwards it to 127.0.0.1:UPSTREAM_PORT
(scripts/slapd.sh's server) and writes what each side sent to OUT_PREFIX.client.bin and
OUT_PREFIX.server.bin, then exits. Run a client against it, e.g.

    record_proxy.py 25390 25389 search & sleep 0.3
    ldapsearch -x -H ldap://127.0.0.1:25390 -D cn=admin,dc=headroom,dc=test -w headroom ...

record.sh in this directory records every vector the unit tests use.
"""
import selectors
import socket
import sys

listen_port, upstream_port, prefix = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", listen_port))
srv.listen(1)
srv.settimeout(30)
client, _ = srv.accept()
upstream = socket.create_connection(("127.0.0.1", upstream_port), timeout=30)
recorded = {client: bytearray(), upstream: bytearray()}
peer = {client: upstream, upstream: client}
sel = selectors.DefaultSelector()
sel.register(client, selectors.EVENT_READ)
sel.register(upstream, selectors.EVENT_READ)
open_sides = 2
while open_sides:
    events = sel.select(timeout=30)
    if not events:
        break
    for key, _ in events:
        s = key.fileobj
        data = s.recv(65536)
        if not data:
            sel.unregister(s)
            open_sides -= 1
            try:
                peer[s].shutdown(socket.SHUT_WR)
            except OSError:
                pass
            continue
        recorded[s] += data
        peer[s].sendall(data)
with open(prefix + ".client.bin", "wb") as f:
    f.write(recorded[client])
with open(prefix + ".server.bin", "wb") as f:
    f.write(recorded[upstream])
