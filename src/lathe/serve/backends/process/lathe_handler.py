"""lathe_handler: runs a user's handler for `lathe serve` (the `process` backend).

The server starts one worker process per model instance:

    /usr/bin/python3 -u lathe_handler.py

with the handler named by LATHE_HANDLER_FILE and a connected unix socket on
the descriptor LATHE_HANDLER_FD. Anything the handler prints goes to the
server's log (stdout is sent to stderr).

The handler (handler.py) is a plain module:

    def load(model_dir):            # optional; runs once per worker
        return model                # optional: passed to predict/infer
    def predict(batch[, model]):    # POST /predict: a list of JSON values in,
        return [...]                # a list of JSON values out, same length
    def infer(inputs[, model]):     # POST /v2/models/m/infer: {name: numpy array}
        return {"y": array}         # batched along dim 0 -> {name: array}

Protocol (both directions): frames of [u32 little-endian length][payload];
payload = [u32 header length][header JSON][tensor bytes]. The header lists
tensors as {"name", "datatype", "shape", "offset", "size"} into the bytes that
follow; BYTES tensors use the KServe v2 layout (u32 length + bytes per element).
The worker first sends {"ok": true, "op": "ready"} (or {"ok": false, "error"})
after load(); then answers every {"op": "infer"} with {"ok": true, "tensors"}
or {"ok": false, "error", "code"}. End of input means exit.

NaN and Infinity: JSON has neither, so non-finite floats in predict()'s result
are written as the strings "NaN", "Infinity", "-Infinity" (the server's policy,
see docs/serving.md).
"""
import importlib.util
import inspect
import json
import math
import os
import socket
import struct
import sys
import traceback

JSON_TENSOR = "__json__"
NUMPY_TYPES = {
    "BOOL": "bool", "UINT8": "uint8", "UINT16": "uint16", "UINT32": "uint32", "UINT64": "uint64",
    "INT8": "int8", "INT16": "int16", "INT32": "int32", "INT64": "int64",
    "FP16": "float16", "FP32": "float32", "FP64": "float64",
}


class HandlerError(Exception):
    def __init__(self, message, code="invalid_argument"):
        super().__init__(message)
        self.code = code


def recv_exact(sock, n):
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = sock.recv_into(view[got:], n - got)
        if k == 0:
            return None
        got += k
    return buf


def read_frame(sock):
    head = recv_exact(sock, 4)
    if head is None:
        return None
    (length,) = struct.unpack("<I", head)
    payload = recv_exact(sock, length)
    if payload is None:
        return None
    (hlen,) = struct.unpack_from("<I", payload, 0)
    header = json.loads(bytes(payload[4:4 + hlen]))
    return header, memoryview(payload)[4 + hlen:]


def write_frame(sock, header, blobs=()):
    h = json.dumps(header).encode()
    body_len = 4 + len(h) + sum(len(b) for b in blobs)
    sock.sendall(struct.pack("<II", body_len, len(h)) + h)
    for b in blobs:
        if len(b):
            sock.sendall(b)


def split_bytes(raw):
    out, i, raw = [], 0, bytes(raw)
    while i < len(raw):
        (n,) = struct.unpack_from("<I", raw, i)
        out.append(raw[i + 4:i + 4 + n])
        i += 4 + n
    return out


def join_bytes(items):
    parts = []
    for x in items:
        b = x if isinstance(x, (bytes, bytearray)) else str(x).encode()
        parts.append(struct.pack("<I", len(b)) + bytes(b))
    return b"".join(parts)


def sanitize(v):
    """Non-finite floats become the strings JSON can carry."""
    if isinstance(v, float) and not math.isfinite(v):
        return "NaN" if math.isnan(v) else ("Infinity" if v > 0 else "-Infinity")
    if isinstance(v, dict):
        return {k: sanitize(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [sanitize(x) for x in v]
    if hasattr(v, "tolist"):  # numpy scalars and arrays
        return sanitize(v.tolist())
    return v


def to_numpy(t, data):
    import numpy as np
    shape = tuple(t["shape"])
    raw = data[t["offset"]:t["offset"] + t["size"]]
    if t["datatype"] == "BYTES":
        arr = np.empty(len(split_bytes(raw)), dtype=object)
        arr[:] = split_bytes(raw)
        return arr.reshape(shape)
    dtype = NUMPY_TYPES.get(t["datatype"])
    if dtype is None:
        raise HandlerError(f"datatype {t['datatype']} is not supported by the process backend")
    return np.frombuffer(raw, dtype=dtype).reshape(shape)


def from_numpy(name, value):
    import numpy as np
    arr = np.asarray(value)
    if arr.dtype == object or arr.dtype.kind in ("U", "S"):
        return {"name": name, "datatype": "BYTES", "shape": list(arr.shape)}, join_bytes(arr.reshape(-1).tolist())
    for v2, np_name in NUMPY_TYPES.items():
        if arr.dtype == np.dtype(np_name):
            arr = np.ascontiguousarray(arr)
            return {"name": name, "datatype": v2, "shape": list(arr.shape)}, arr.tobytes()
    raise HandlerError(f"output '{name}' has dtype {arr.dtype}, which has no KServe v2 datatype", "internal")


class Worker:
    def __init__(self, path, model_dir):
        spec = importlib.util.spec_from_file_location("lathe_user_handler", path)
        if spec is None:
            raise HandlerError(f"cannot import {path}")
        sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
        self.mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(self.mod)
        self.model = None
        if hasattr(self.mod, "load"):
            self.model = self.mod.load(model_dir)
        threads = int(os.environ.get("LATHE_THREADS", "0") or 0)
        if threads > 0 and "torch" in sys.modules:
            sys.modules["torch"].set_num_threads(threads)

    def call(self, fn_name, arg):
        fn = getattr(self.mod, fn_name, None)
        if fn is None:
            other = "POST /v2/models/<m>/infer needs infer(inputs)" if fn_name == "infer" else \
                "POST /predict needs predict(batch)"
            raise HandlerError(f"the handler defines no {fn_name}(): {other}")
        try:
            nparams = len(inspect.signature(fn).parameters)
        except (TypeError, ValueError):
            nparams = 1
        return fn(arg, self.model) if nparams >= 2 else fn(arg)

    def infer(self, header, data):
        tensors = header.get("tensors", [])
        if len(tensors) == 1 and tensors[0]["name"] == JSON_TENSOR:
            t = tensors[0]
            docs = [json.loads(x) for x in split_bytes(data[t["offset"]:t["offset"] + t["size"]])]
            out = self.call("predict", docs)
            if not isinstance(out, (list, tuple)) or len(out) != len(docs):
                raise HandlerError(f"predict() must return a list of {len(docs)} results (one per request), "
                                   f"got {type(out).__name__}", "internal")
            blob = join_bytes([json.dumps(sanitize(o), allow_nan=False).encode() for o in out])
            return [{"name": JSON_TENSOR, "datatype": "BYTES", "shape": [len(out)]}], [blob]
        inputs = {t["name"]: to_numpy(t, data) for t in tensors}
        out = self.call("infer", inputs)
        if isinstance(out, (list, tuple)):
            out = {f"output__{i}": v for i, v in enumerate(out)}
        elif not isinstance(out, dict):
            out = {"output__0": out}
        metas, blobs = [], []
        for name, value in out.items():
            meta, blob = from_numpy(name, value)
            metas.append(meta)
            blobs.append(blob)
        return metas, blobs


def die_with_server():
    """A worker stuck in a handler must not outlive a killed server (Linux only)."""
    try:
        import ctypes
        import signal
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if str(os.getppid()) != os.environ.get("LATHE_SERVER_PID", str(os.getppid())):
        os._exit(0)  # the server died before prctl took effect


def main():
    die_with_server()
    fd = int(os.environ["LATHE_HANDLER_FD"])
    sock = socket.socket(fileno=fd)
    sys.stdout = sys.stderr
    try:
        worker = Worker(os.environ["LATHE_HANDLER_FILE"], os.environ.get("LATHE_MODEL_DIR", "."))
    except BaseException as e:  # report any load failure, then exit
        traceback.print_exc()
        write_frame(sock, {"ok": False, "error": f"{type(e).__name__}: {e}"})
        return 1
    write_frame(sock, {"ok": True, "op": "ready", "pid": os.getpid()})
    while True:
        frame = read_frame(sock)
        if frame is None:
            return 0
        header, data = frame
        try:
            metas, blobs = worker.infer(header, data)
        except HandlerError as e:
            write_frame(sock, {"ok": False, "error": str(e), "code": e.code})
            continue
        except ValueError as e:  # the handler's way to say "bad input": a 400
            write_frame(sock, {"ok": False, "error": f"ValueError: {e}", "code": "invalid_argument"})
            continue
        except Exception as e:
            traceback.print_exc()
            write_frame(sock, {"ok": False, "error": f"{type(e).__name__}: {e}", "code": "internal"})
            continue
        offset = 0
        for m, b in zip(metas, blobs):
            m["offset"], m["size"] = offset, len(b)
            offset += len(b)
        write_frame(sock, {"ok": True, "tensors": metas}, blobs)


if __name__ == "__main__":
    sys.exit(main())
