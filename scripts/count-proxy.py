#!/usr/bin/env python3
"""A counting HTTP proxy for the benchmark: forwards every request to an S3 endpoint
byte for byte (the Host header included, which SigV4 signs) and counts GetObject
requests under one key prefix, so `scripts/bench` can show how many inputs an
unchanged inbox run read.

    count-proxy.py UPSTREAM_URL BUCKET/PREFIX/ PORT_FILE COUNT_FILE

Listens on 127.0.0.1 (a free port, written to PORT_FILE); on SIGTERM writes the
number of GetObject requests under BUCKET/PREFIX/ (path-style `GET /BUCKET/PREFIX/key`,
with no query or the SDK's `x-id=GetObject`) to COUNT_FILE and exits.
"""
import http.client
import http.server
import signal
import sys
import threading
import urllib.parse

upstream, under, port_file, count_file = sys.argv[1:5]
up = urllib.parse.urlsplit(upstream)
count = 0
lock = threading.Lock()
local = threading.local()


def conn():
    c = getattr(local, "conn", None)
    if c is None:
        c = http.client.HTTPConnection(up.hostname, up.port, timeout=120)
        local.conn = c
    return c


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def forward(self):
        global count
        path, _, query = self.path.partition("?")
        get_object = not query or query == "x-id=GetObject"
        if self.command == "GET" and get_object and path.startswith(f"/{under}"):
            with lock:
                count += 1
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";")[0], 16)
                data = self.rfile.read(size + 2)[:size]
                if size == 0:
                    break
                chunks.append(data)
            body = b"".join(chunks)
        headers = {k: v for k, v in self.headers.items() if k.lower() != "transfer-encoding"}
        if body is not None:
            headers["Content-Length"] = str(len(body))
        for attempt in range(2):
            try:
                c = conn()
                c.request(self.command, self.path, body=body, headers=headers)
                r = c.getresponse()
                data = r.read()
                break
            except (http.client.HTTPException, OSError):
                local.conn = None
                if attempt:
                    raise
        self.send_response_only(r.status, r.reason)
        for k, v in r.getheaders():
            if k.lower() not in ("transfer-encoding", "content-length", "connection"):
                self.send_header(k, v)
        if self.command == "HEAD":
            self.send_header("Content-Length", r.getheader("Content-Length", "0"))
        else:
            self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = forward


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
with open(port_file, "w") as f:
    f.write(str(server.server_address[1]))


def stop(*_):
    with open(count_file, "w") as f:
        f.write(str(count))
    sys.exit(0)


signal.signal(signal.SIGTERM, stop)
server.serve_forever()
