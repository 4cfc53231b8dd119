#!/usr/bin/python3
"""A WebSocket echo server for headroom's tests, on Debian's python3-websockets (10.x).

It is deliberately not headroom's code: the tests of headroom_proto::ws interoperate with an
independent RFC 6455 implementation. Start it with scripts/ws-echo.sh (which installs the
package, runs this in the background and keeps a pid file); run by hand:

    /usr/bin/python3 scripts/ws_echo.py --host 127.0.0.1 --port 25380 \
        [--tls-port 25381 --cert CERT.pem --key KEY.pem]

With --tls-port it serves the same paths over TLS too (wss://HOST:TLS_PORT/), with the given
certificate (scripts/ws-echo.sh passes the test PKI's localhost one); TLS 1.2 and 1.3, no ALPN.

Paths (query parameters are optional):

  /  or /echo        echo every message as it came (text as text, binary as binary; a
                     fragmented message is echoed whole, in one frame); the library answers
                     pings with pongs and a close with a close (same code)
  /count?n=N&size=S&type=text|binary
                     send N messages of S bytes ('x' repeated) on connect, then close with 1000
  /ping?payload=P    send a ping carrying P, wait (up to 5 s) for the pong, then send the text
                     "pong:P" and echo as /echo does
  /close?code=C&reason=R
                     close at once with code C (default 1000) and reason R (default empty)
  /mix               a fixed sequence touching every frame kind (for recorded-stream tests):
                     text "hello"; empty binary; 125-byte text; 126-byte binary; 70,000-byte
                     binary; a ping "are you there?"; a text in three fragments with a ping
                     "mid" between the second and third; a multi-byte UTF-8 text; close 1000 "bye"

No compression (permessage-deflate is refused), no keepalive pings of its own (recorded streams
stay deterministic), messages up to 16 MiB. It prints "ws_echo: listening on HOST:PORT" once
ready and stops on SIGTERM or SIGINT.
"""

import argparse
import asyncio
import signal
import ssl
import sys
import urllib.parse

import websockets

MAX_SIZE = 16 * 1024 * 1024


def params(path):
    parsed = urllib.parse.urlsplit(path)
    query = dict(urllib.parse.parse_qsl(parsed.query))
    return parsed.path, query


async def echo(ws):
    async for message in ws:
        await ws.send(message)


async def count(ws, query):
    n = int(query.get("n", "10"))
    size = int(query.get("size", "16"))
    kind = query.get("type", "text")
    payload = "x" * size if kind == "text" else b"x" * size
    for _ in range(n):
        await ws.send(payload)
    await ws.close(1000, "done")


async def ping(ws, query):
    payload = query.get("payload", "ping").encode()
    waiter = await ws.ping(payload)
    await asyncio.wait_for(waiter, timeout=5)
    await ws.send("pong:" + payload.decode())
    await echo(ws)


async def mix(ws):
    await ws.send("hello")
    await ws.send(b"")
    await ws.send("t" * 125)
    await ws.send(b"b" * 126)
    await ws.send(bytes(i % 251 for i in range(70000)))
    await ws.ping(b"are you there?")

    async def fragments():
        yield "frag"
        yield "mented "
        await ws.ping(b"mid")
        yield "text \u2713"

    await ws.send(fragments())
    await ws.send("h\u00e9llo w\u00f6rld \u2713 \U0001d11e")
    await ws.close(1000, "bye")


async def handler(ws):
    path, query = params(ws.path)
    try:
        if path in ("/", "/echo"):
            await echo(ws)
        elif path == "/count":
            await count(ws, query)
        elif path == "/ping":
            await ping(ws, query)
        elif path == "/close":
            await ws.close(int(query.get("code", "1000")), query.get("reason", ""))
        elif path == "/mix":
            await mix(ws)
        else:
            await ws.close(1008, "unknown path")
    except websockets.ConnectionClosed:
        pass


async def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=25380)
    ap.add_argument("--tls-port", type=int, default=None)
    ap.add_argument("--cert", default=None)
    ap.add_argument("--key", default=None)
    args = ap.parse_args()
    if args.tls_port is not None and not (args.cert and args.key):
        ap.error("--tls-port needs --cert and --key")

    loop = asyncio.get_running_loop()
    stop = loop.create_future()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set_result, None)

    options = dict(compression=None, max_size=MAX_SIZE, ping_interval=None, close_timeout=2)
    async with websockets.serve(handler, args.host, args.port, **options):
        if args.tls_port is None:
            print(f"ws_echo: listening on {args.host}:{args.port} "
                  f"(websockets {websockets.__version__})", flush=True)
            await stop
        else:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.minimum_version = ssl.TLSVersion.TLSv1_2
            context.load_cert_chain(args.cert, args.key)
            async with websockets.serve(handler, args.host, args.tls_port, ssl=context,
                                        **options):
                print(f"ws_echo: listening on {args.host}:{args.port} and "
                      f"{args.host}:{args.tls_port} (TLS) "
                      f"(websockets {websockets.__version__})", flush=True)
                await stop
    print("ws_echo: stopped", flush=True)


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except OSError as e:
        print(f"ws_echo: {e}", file=sys.stderr)
        sys.exit(1)
