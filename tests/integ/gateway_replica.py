"""A fake replica for the deployments' front tests (test_gateway.py): an HTTP/1.1
server on a unix socket that answers its health path and, for any other path,
says which replica answered and what it got (as JSON).

  gateway_replica.py SOCKET REPLICA_ID [drop]

GET /healthz answers 200, or 503 while the file SOCKET.sick exists.
/slow?ms=N waits N ms before answering. With `drop`, every request but the
health probe's is read and its connection closed without a byte of answer.
"""
import json
import os
import socketserver
import sys
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def answer(self, code, body):
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def handle_any(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n).decode() if n else ""
        url = urllib.parse.urlsplit(self.path)
        if url.path == "/healthz":
            sick = os.path.exists(self.server.server_address + ".sick")
            return self.answer(503 if sick else 200, {"ready": not sick})
        if DROP:
            self.close_connection = True
            return
        if url.path == "/slow":
            ms = int(urllib.parse.parse_qs(url.query).get("ms", ["500"])[0])
            time.sleep(ms / 1000)
        self.answer(200, {"replica": REPLICA, "method": self.command, "path": self.path,
                          "body": body, "authorization": self.headers.get("Authorization"),
                          "prefix": self.headers.get("X-Forwarded-Prefix")})

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = handle_any


class Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        pass  # a probe hangs up after the status line: not worth a traceback


if __name__ == "__main__":
    path, REPLICA = sys.argv[1], sys.argv[2]
    DROP = sys.argv[3:] == ["drop"]
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    srv = Server(path, Handler)
    os.chmod(path, 0o777)
    print("ready", flush=True)
    srv.serve_forever()
