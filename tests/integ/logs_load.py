"""Large logs for the log tests: a CRI log written straight into a finished
run's directory, read by several clients at once through the unix socket
while the daemon's memory is sampled (used by test_logs.py and
tests/slow/test_logs_large.py)."""
import http.client
import os
import socket
import threading
import time

TS = "2026-11-29T18:30:00.123456789Z"


class UnixConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout=120):
        super().__init__("lathe", timeout=timeout)
        self.unix_path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.unix_path)


def get(daemon, path, timeout=120):
    """(status, headers dict with lower-case names, body bytes) of one GET over the unix socket."""
    c = UnixConnection(os.path.join(daemon.home, "lathe.sock"), timeout)
    c.request("GET", path)
    r = c.getresponse()
    body = r.read()
    c.close()
    return r.status, {k.lower(): v for k, v in r.getheaders()}, body


def line_text(i):
    """The text of line i of a big log: ~100 bytes, its number first."""
    return f"{i:09d} " + "abcdefghij" * 9


def write_big_log(path, target_bytes):
    """Writes about target_bytes of CRI records to path; every 1000th line is
    split into a P and an F piece, every 5000th goes to stderr as 'ERR <i>'.
    Returns the number of lines."""
    lines = 0
    size = 0
    batch = 20000
    with open(path, "wb") as f:
        while size < target_bytes:
            recs = []
            for i in range(lines, lines + batch):
                if i % 5000 == 0:
                    recs.append(f"{TS} stderr F ERR {i}\n")
                elif i % 1000 == 0:
                    t = line_text(i)
                    recs.append(f"{TS} stdout P {t[:40]}\n{TS} stdout F {t[40:]}\n")
                else:
                    recs.append(f"{TS} stdout F {line_text(i)}\n")
            data = "".join(recs).encode()
            f.write(data)
            size += len(data)
            lines += batch
    return lines


def expected_line(i):
    return f"ERR {i}" if i % 5000 == 0 else line_text(i)


def memory_kb(pid):
    """(VmRSS, VmHWM) of pid in KiB."""
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for l in f:
            k, _, v = l.partition(":")
            if k in ("VmRSS", "VmHWM"):
                out[k] = int(v.split()[0])
    return out["VmRSS"], out["VmHWM"]


def reset_peak(pid):
    """Resets VmHWM to the current RSS (root only); False when the kernel refuses."""
    try:
        with open(f"/proc/{pid}/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def read_concurrently(test, daemon, run_id, clients, lines):
    """Has `clients` clients read the whole log of run_id at once, each
    checking every line; returns (peak VmRSS sampled, VmHWM, baseline RSS) in
    KiB and the slowest GET /status meanwhile in ms."""
    pid = daemon.proc.pid
    reset_peak(pid)
    base_rss, _ = memory_kb(pid)
    peak = [base_rss]
    done = threading.Event()

    status_ms = [0.0]  # the slowest GET /status while the clients read (reported, not asserted)

    def sample():
        last_status = 0.0
        while not done.is_set():
            peak[0] = max(peak[0], memory_kb(pid)[0])
            if time.monotonic() - last_status > 0.1:
                last_status = time.monotonic()
                get(daemon, "/api/v1/status")
                status_ms[0] = max(status_ms[0], (time.monotonic() - last_status) * 1000)
            time.sleep(0.005)

    results = [None] * clients

    def client(k):
        c = UnixConnection(os.path.join(daemon.home, "lathe.sock"))
        c.request("GET", f"/api/v1/runs/{run_id}/logs")
        r = c.getresponse()
        count, rest, bad = 0, b"", None
        while True:
            chunk = r.read(1 << 20)
            if not chunk:
                break
            data = rest + chunk
            cut = data.rfind(b"\n") + 1
            rest = data[cut:]
            # Spot-check: the first line of each chunk is the one expected there.
            first = data[:data.find(b"\n")].decode()
            if cut and bad is None and first != expected_line(count):
                bad = (count, first[:120])
            count += data.count(b"\n", 0, cut)
        c.close()
        results[k] = (r.status, count, rest, bad)

    sampler = threading.Thread(target=sample)
    sampler.start()
    threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    done.set()
    sampler.join()
    _, hwm = memory_kb(pid)
    for status, count, rest, bad in results:
        test.assertEqual(status, 200)
        test.assertEqual(count, lines)
        test.assertEqual(rest, b"")
        test.assertIsNone(bad)
    return peak[0], hwm, base_rss, status_ms[0]
