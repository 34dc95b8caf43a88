"""A run's server for the proxy tests: answers every request with what it
received (as JSON), and echoes websocket text frames. Listens on a loopback
port or a unix socket:  proxy_upstream.py tcp PORT | unix PATH [LABEL]
PORT may be env:NAME, the port in the environment variable NAME (the one the
daemon chose for the run: env:LATHE_PORT_8000, env:PORT).
"""
import base64
import hashlib
import json
import os
import socket
import socketserver
import sys

WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


def read_frame(f):
    b1, b2 = f.read(2)
    n = b2 & 0x7F
    if n == 126:
        n = int.from_bytes(f.read(2), "big")
    elif n == 127:
        n = int.from_bytes(f.read(8), "big")
    mask = f.read(4) if b2 & 0x80 else b"\0\0\0\0"
    data = bytes(c ^ mask[i % 4] for i, c in enumerate(f.read(n)))
    return b1 & 0x0F, data


def frame(opcode, data):
    n = len(data)
    head = bytes([0x80 | opcode])
    if n < 126:
        head += bytes([n])
    elif n < 65536:
        head += bytes([126]) + n.to_bytes(2, "big")
    else:
        head += bytes([127]) + n.to_bytes(8, "big")
    return head + data


class Handler(socketserver.StreamRequestHandler):
    def handle(self):
        line = self.rfile.readline().decode()
        if not line:
            return
        method, target, _ = line.split(" ", 2)
        headers = []
        while True:
            h = self.rfile.readline().decode()
            if h in ("\r\n", "\n", ""):
                break
            k, v = h.split(":", 1)
            headers.append([k.strip(), v.strip()])
        get = {k.lower(): v for k, v in headers}
        body = self.rfile.read(int(get.get("content-length", "0") or 0))
        if get.get("upgrade", "").lower() == "websocket":
            accept = base64.b64encode(hashlib.sha1(
                (get["sec-websocket-key"] + WS_GUID).encode()).digest()).decode()
            self.wfile.write(("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                              "Connection: Upgrade\r\nSec-WebSocket-Accept: " + accept +
                              "\r\n\r\n").encode())
            self.wfile.flush()
            while True:
                op, data = read_frame(self.rfile)
                if op == 8:
                    self.wfile.write(frame(8, b""))
                    return
                self.wfile.write(frame(1, b"echo:" + data))
                self.wfile.flush()
        out = json.dumps({"label": LABEL, "method": method, "target": target, "headers": headers,
                          "body": body.decode(errors="replace"), "uid": os.getuid(),
                          "port": PORT}).encode()
        self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                         b"Set-Cookie: app=1; Domain=localhost; Path=/\r\n"
                         b"Content-Length: " + str(len(out)).encode() + b"\r\n\r\n" + out)


class TcpServer(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
    daemon_threads = True


class UnixServer(socketserver.ThreadingUnixStreamServer):
    daemon_threads = True


if __name__ == "__main__":
    kind, where = sys.argv[1], sys.argv[2]
    LABEL = sys.argv[3] if len(sys.argv) > 3 else "upstream"
    PORT = None
    if kind == "tcp":
        PORT = int(os.environ[where[4:]] if where.startswith("env:") else where)
        server = TcpServer(("127.0.0.1", PORT), Handler)
    else:
        if os.path.exists(where):
            os.unlink(where)
        server = UnixServer(where, Handler)
    print("listening", flush=True)
    server.serve_forever()
