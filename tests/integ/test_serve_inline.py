"""`lathe serve` with a backend that runs on the I/O thread itself (identity
declares `runs_inline`): hot swap under keep-alive load and SIGTERM under load.

Inline execution skips the instance thread, so these paths differ from the
TorchScript and process models covered in test_serve.py: the swap and the
drain must still hold when the batch runs inside the connection's handler.
No test asserts a wall-clock bound; the server binds port 0.
"""
import http.client
import json
import os
import shutil
import signal
import tempfile
import threading
import unittest

from test_serve import ECHO_CONFIG, Server, write

CLIENTS = 4


class Load:
    """CLIENTS threads, each on its own keep-alive connection, sending v2 infer
    requests until stopped. Records every answer and every failure."""

    def __init__(self, port):
        self.port = port
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.versions, self.bad, self.conn_errors = [], [], []
        self.conns = [http.client.HTTPConnection("127.0.0.1", port, timeout=30) for _ in range(CLIENTS)]
        self.threads = [threading.Thread(target=self.run, args=(i,)) for i in range(CLIENTS)]

    def run(self, i):
        try:
            self.send_until_stopped(i)
        finally:
            self.conns[i].close()

    def send_until_stopped(self, i):
        body = json.dumps({"inputs": [{"name": "x", "shape": [1, 2], "datatype": "FP32", "data": [i, 0.5]}]})
        c = self.conns[i]
        while not self.stop.is_set():
            try:
                c.request("POST", "/v2/models/echo/infer", body=body, headers={"Content-Type": "application/json"})
                r = c.getresponse()
                data = r.read()
            except (OSError, http.client.HTTPException) as e:
                with self.lock:
                    self.conn_errors.append(repr(e))
                return  # the server is gone (or going): this client is done
            with self.lock:
                if r.status != 200:
                    self.bad.append((r.status, data[:300]))
                    continue
                out = json.loads(data)
                if out["outputs"][0]["data"] != [i, 0.5]:
                    self.bad.append(("wrong output", out))
                self.versions.append(out["model_version"])
            if r.getheader("Connection", "").lower() == "close":
                return

    def count(self):
        with self.lock:
            return len(self.versions)

    def start(self):
        for t in self.threads:
            t.start()
        return self

    def join(self):
        self.stop.set()
        for t in self.threads:
            t.join()


class InlineServe(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="lathe-serve-inline-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.repo = os.path.join(self.tmp, "repo")
        write(f"{self.repo}/echo/config.yaml", ECHO_CONFIG)
        write(f"{self.repo}/echo/1/READY", "")

    def serve(self, *args):
        s = Server("--repository", self.repo, "--http-threads", "2", *args).start()
        self.addCleanup(s.stop)
        return s

    def test_hot_swap_under_keep_alive_load(self):
        s = self.serve("--model-control", "watch", "--watch-interval", "100ms")
        load = Load(s.port).start()
        try:
            s.wait_for(lambda: load.count() > 200, "answers from version 1")
            write(f"{self.repo}/echo/2/READY", "")
            s.wait_for(lambda: load.versions[-1:] == ["2"] and load.versions.count("2") > 200,
                       "answers from version 2")
        finally:
            load.join()
        self.assertEqual(load.bad, [])
        self.assertEqual(load.conn_errors, [])
        first2 = load.versions.index("2")
        self.assertEqual(set(load.versions[:first2]), {"1"})
        # Clients on other connections may still finish on version 1 just after
        # the swap, but every client moves to 2 and none goes back for long.
        self.assertEqual(load.versions[-CLIENTS:], ["2"] * CLIENTS)
        idx = s.json("POST", "/v2/repository/index")
        self.assertEqual([(m["name"], m["version"]) for m in idx if "version" in m], [("echo", "2")])

    def test_sigterm_under_load_exits_cleanly(self):
        s = self.serve()
        load = Load(s.port).start()
        try:
            s.wait_for(lambda: load.count() > 500, "answers under load")
            s.proc.send_signal(signal.SIGTERM)
            code = s.proc.wait(timeout=60)
        finally:
            load.join()
        self.assertEqual(code, 0, s.read_log())
        # Every answer that came was a correct 200; the clients stopped only
        # because the server closed their connections.
        self.assertEqual(load.bad, [])
        self.assertLessEqual(len(load.conn_errors), CLIENTS)
        self.assertNotIn("Sanitizer", s.read_log())


if __name__ == "__main__":
    unittest.main()
