"""Calls a running `lathe serve` (examples/serve/models) with the standard library only."""
import json
import struct
import sys
import urllib.request

base = sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:8000"


def post(path, body, headers=None):
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    req = urllib.request.Request(base + path, data=data, method="POST",
                                 headers={"Content-Type": "application/json", **(headers or {})})
    with urllib.request.urlopen(req) as r:
        return r.read(), dict(r.headers)


# KServe v2, JSON tensors (nested data), high priority.
body, _ = post("/v2/models/mlp/infer",
               {"inputs": [{"name": "x", "shape": [2, 4], "datatype": "FP32", "data": [[1, 2, 3, 4], [0, 0, 0, 1]]}]},
               {"X-Priority": "high"})
print("v2 json:", json.loads(body)["outputs"][0]["data"])

# The binary tensor extension: JSON header, then raw little-endian floats.
header = json.dumps({"inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP32",
                                 "parameters": {"binary_data_size": 16}}],
                     "parameters": {"binary_data_output": True}}).encode()
body, headers = post("/v2/models/mlp/infer", header + struct.pack("<4f", 1, 2, 3, 4),
                     {"Inference-Header-Content-Length": str(len(header))})
n = int(headers["Inference-Header-Content-Length"])
print("v2 binary:", struct.unpack("<3f", body[n:]))

# Plain JSON for the handler.
body, _ = post("/v1/models/hello:predict", {"text": "lathe"})
print("predict:", json.loads(body))
