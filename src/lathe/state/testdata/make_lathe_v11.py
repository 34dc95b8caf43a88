#!/usr/bin/python3
"""Makes lathe-v11.sql and lathe-v11.json: a daemon's database as a Lathe of
schema v11 (before the one credentials table) left it, with API tokens, a
browser session and deployment keys issued through that Lathe's own CLI and
API, and the plaintext credentials the upgrade test checks against it
(api/credential_upgrade_test.cc).

    LATHE_BIN=/path/to/a/v11/lathe /usr/bin/python3 make_lathe_v11.py

Run as root (a deployment's replicas run as their owner). The files are
written beside this script.
"""
import http.client
import json
import os
import sqlite3
import sys
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "..", "tests", "integ"))
from harness import Daemon  # noqa: E402


def port(d):
    with open(os.path.join(d.home, "endpoint.json")) as f:
        return int(json.load(f)["tcp"].rsplit(":", 1)[1])


def request(d, method, path, cookie=None, host=None, headers=None, body=None):
    h = {"Host": host or f"localhost:{port(d)}"}
    if cookie:
        h["Cookie"] = f"lathe_session={cookie}"
    h.update(headers or {})
    c = http.client.HTTPConnection("127.0.0.1", port(d), timeout=30)
    c.request(method, path, body=None if body is None else json.dumps(body), headers=h)
    r = c.getresponse()
    body = r.read().decode()
    c.close()
    return r.status, r.headers, body


def main():
    d = Daemon(gpus="sim:1x24GB").start()
    try:
        local = d.env(HOME="/tmp")
        out = {"tokens": [], "sessions": [], "deploy_keys": []}
        for args in (["--name", "laptop", "--expires", "3650d"], ["--name", "ci"],
                     ["--name", "spare", "--expires", "1s"]):
            t = json.loads(d.cli("token", "create", "--json", *args, env=local).stdout)
            out["tokens"].append(t)

        def redeem(url):
            u = urllib.parse.urlsplit(url)
            status, headers, body = request(d, "GET", u.path + "?" + u.query, host=u.netloc)
            assert status == 303, (status, body)
            cookie = headers["Set-Cookie"].split(";", 1)[0].split("=", 1)[1]
            status, _, body = request(d, "GET", "/api/v1/session", cookie)
            assert status == 200, (status, body)
            out["sessions"].append({"cookie": cookie, "session": json.loads(body)})

        # One session from `lathe ui` (the socket), one from a code asked for
        # with the "laptop" token (it ends with that token).
        redeem(d.cli("ui", env=local).stdout.strip())
        bearer = {"Authorization": "Bearer " + out["tokens"][0]["token"]}
        status, _, body = request(d, "POST", "/api/v1/sessions/code", headers=bearer, body={})
        assert status == 201, (status, body)
        redeem(json.loads(body)["url"])

        d.cli("deploy", "create", "web", "--port", "18457", "--replicas", "1", "--", "/bin/sleep",
              "1000000")
        for args in (["--name", "ci"], ["--name", "spare", "--expires", "3650d"]):
            k = json.loads(d.cli("deploy", "key", "create", "web", "--json", *args).stdout)
            out["deploy_keys"].append(k)
    finally:
        d.stop()
    db = sqlite3.connect(os.path.join(d.home, "lathe.db"))
    version = db.execute("PRAGMA user_version").fetchone()[0]
    assert version == 11, version
    with open(os.path.join(HERE, "lathe-v11.sql"), "w") as f:
        for line in db.iterdump():
            f.write(line + "\n")
        f.write(f"PRAGMA user_version = {version};\n")
    with open(os.path.join(HERE, "lathe-v11.json"), "w") as f:
        json.dump(out, f, indent=2, sort_keys=True)
        f.write("\n")
    d.cleanup()


if __name__ == "__main__":
    main()
