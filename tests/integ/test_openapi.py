"""The OpenAPI 3 document of the REST API: data/openapi.yaml is what scripts/openapi.py makes
of docs/api.md (so neither can drift from the other), and the daemon serves it as JSON at
GET /api/v1/openapi.json (the unit test api/openapi_test.cc checks it against the route
table).
"""
import http.client
import json
import os
import subprocess
import unittest

from harness import PY, DaemonTest

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


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


if __name__ == "__main__":
    unittest.main()
