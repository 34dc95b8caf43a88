"""The OpenAPI 3 document of the REST API: data/openapi.yaml is what scripts/openapi.py makes
of docs/api.md (so neither can drift from the other), and the daemon serves it as JSON at
GET /api/v1/openapi.json (the unit test api/openapi_test.cc checks it against the route
table). Like every route, it answers any local user who authenticates as docs/api.md says:
an unprivileged user over the unix socket (no token) or over TCP with a token of their own;
over TCP without a credential it is 401.
"""
import http.client
import json
import os
import subprocess
import unittest

from harness import PY, DaemonTest, second_user

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
USER = "lathe-it-openapi"

# Run as the second user: GET /api/v1/openapi.json over TCP (argv: port, token or "")
# and over the unix socket (argv: socket path); prints what each answered.
CLIENT = r"""
import http.client, json, socket, sys
port, token, sock_path = int(sys.argv[1]), sys.argv[2], sys.argv[3]
def answer(c, headers):
    c.request("GET", "/api/v1/openapi.json", headers=headers)
    r = c.getresponse()
    body = r.read()
    c.close()
    try:
        doc = json.loads(body)
    except ValueError:
        doc = None
    return {"status": r.status, "www": r.getheader("WWW-Authenticate"), "doc": doc}
class Unix(http.client.HTTPConnection):
    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(sock_path)
out = {
    "tcp": answer(http.client.HTTPConnection("127.0.0.1", port, timeout=30),
                  {"Authorization": "Bearer " + token} if token else {}),
    "unix": answer(Unix("lathe", timeout=30), {}),
}
print(json.dumps({k: {"status": v["status"], "www": v["www"],
                      "openapi": (v["doc"] or {}).get("openapi"),
                      "msg_id": (v["doc"] or {}).get("msg_id")} for k, v in out.items()}))
"""


class OpenApi(DaemonTest):
    gpus = "none"

    def test_the_document_is_docs_api_md_and_the_daemon_serves_it(self):
        r = subprocess.run([PY, os.path.join(ROOT, "scripts", "openapi.py"), "--check"],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(os.path.join(self.d.home, "endpoint.json")) as f:
            port = int(json.load(f)["tcp"].rsplit(":", 1)[1])
        with open(os.path.join(self.d.home, "token")) as f:
            token = f.read().strip()
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        c.request("GET", "/api/v1/openapi.json", headers={"Authorization": "Bearer " + token})
        resp = c.getresponse()
        body = resp.read()
        c.close()
        self.assertEqual(resp.status, 200, body[:500])
        doc = json.loads(body)
        self.assertEqual(doc["openapi"], "3.0.3")
        self.assertIn("post", doc["paths"]["/api/v1/runs"])
        logs = doc["paths"]["/api/v1/runs/{run}/logs"]["get"]
        self.assertIn("tail", [p["name"] for p in logs["parameters"] if p["in"] == "query"])
        self.assertIn("/api/v1/openapi.json", doc["paths"])

    def as_second_user(self, token):
        with open(os.path.join(self.d.home, "endpoint.json")) as f:
            port = json.load(f)["tcp"].rsplit(":", 1)[1]
        r = subprocess.run(
            ["setpriv", "--reuid", USER, "--regid", USER, "--init-groups", PY, "-c", CLIENT, port,
             token, os.path.join(self.d.home, "lathe.sock")],
            capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        return json.loads(r.stdout)

    def test_an_unprivileged_user_gets_it_with_a_credential_and_not_without(self):
        second_user(self, USER)
        token = json.loads(self.d.cli("token", "create", "--json", user=USER,
                                      env=self.d.env(HOME="/tmp")).stdout)["token"]
        got = self.as_second_user(token)
        # With a token of their own over TCP, and over the unix socket (SO_PEERCRED, no token).
        for how in ("tcp", "unix"):
            self.assertEqual(got[how]["status"], 200, got)
            self.assertEqual(got[how]["openapi"], "3.0.3", got)
        # Over TCP with no credential at all: 401 api.unauthenticated, with the challenge.
        bare = self.as_second_user("")["tcp"]
        self.assertEqual(bare["status"], 401, bare)
        self.assertEqual(bare["msg_id"], "api.unauthenticated")
        self.assertEqual(bare["www"], 'Bearer realm="lathe"')
        self.assertIsNone(bare["openapi"])
        # A token that is no token of this daemon's: 401 too, saying the token is bad.
        wrong = self.as_second_user("lathe_notatoken_x")["tcp"]
        self.assertEqual(wrong["status"], 401, wrong)
        self.assertEqual(wrong["www"], 'Bearer realm="lathe", error="invalid_token"')


if __name__ == "__main__":
    unittest.main()
