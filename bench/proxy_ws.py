"""Websocket echo round trips, for bench/proxy.sh: one connection, N text frames
of B bytes sent one after another, each timed until its echo is back.

  proxy_ws.py PORT N BYTES [HOST AUTHORIZATION]

PORT is where to connect on 127.0.0.1; HOST and AUTHORIZATION, when given, are
sent with the upgrade (Lathe's proxy picks the run by Host). The server is
tests/integ/proxy_upstream.py, which answers each frame with "echo:" + it.
Prints one line: "RESULT p50_us p99_us max_us n msgs_per_s" (round trips per
second over the whole loop, one in flight at a time).
"""
import base64
import os
import socket
import sys
import time


def frame(data):
    mask = os.urandom(4)
    n = len(data)
    if n < 126:
        head = bytes([0x81, 0x80 | n])
    elif n < 65536:
        head = bytes([0x81, 0x80 | 126]) + n.to_bytes(2, "big")
    else:
        head = bytes([0x81, 0x80 | 127]) + n.to_bytes(8, "big")
    return head + mask + bytes(c ^ mask[i % 4] for i, c in enumerate(data))


def read_frame(f):
    _, b2 = f.read(2)
    n = b2 & 0x7F
    if n == 126:
        n = int.from_bytes(f.read(2), "big")
    elif n == 127:
        n = int.from_bytes(f.read(8), "big")
    return f.read(n)


def main():
    port, count, size = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    host = sys.argv[4] if len(sys.argv) > 4 else f"127.0.0.1:{port}"
    auth = f"Authorization: {sys.argv[5]}\r\n" if len(sys.argv) > 5 else ""
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    key = base64.b64encode(os.urandom(16)).decode()
    s.sendall((f"GET /ws HTTP/1.1\r\nHost: {host}\r\n{auth}Upgrade: websocket\r\n"
               f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
               f"Origin: http://{host}\r\n\r\n").encode())
    f = s.makefile("rb")
    status = f.readline().decode()
    if " 101 " not in status:
        sys.exit("no upgrade: " + status.strip())
    while f.readline() not in (b"\r\n", b""):
        pass
    payload = b"x" * size
    msg = frame(payload)  # one masked frame, sent every time: the client's cost stays out
    want = b"echo:" + payload
    times = []
    start = time.perf_counter_ns()
    for _ in range(count):
        t0 = time.perf_counter_ns()
        s.sendall(msg)
        got = read_frame(f)
        times.append(time.perf_counter_ns() - t0)
        if got != want:
            sys.exit("wrong echo")
    total_s = (time.perf_counter_ns() - start) / 1e9
    s.close()
    times.sort()
    pick = lambda q: times[min(len(times) - 1, int(q * len(times)))] // 1000
    print(f"RESULT {pick(0.5)} {pick(0.99)} {times[-1] // 1000} {count} {count / total_s:.1f}")


if __name__ == "__main__":
    main()
