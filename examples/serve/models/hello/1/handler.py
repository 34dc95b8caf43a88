"""A `process` handler: lathe serve runs it in worker processes (one per instance)."""


def load(model_dir):
    # Runs once per worker; load weights from model_dir here. The result is
    # passed to predict/infer when they take a second argument.
    return {"greeting": "hello"}


def predict(batch, model):
    # POST /predict: `batch` holds the JSON bodies of several requests; return
    # one JSON value per request, in order.
    return [{"reply": f"{model['greeting']}, {req.get('text', 'world')}", "length": len(req.get("text", ""))}
            for req in batch]


def infer(inputs):
    # POST /v2/models/hello/infer: numpy arrays batched along dim 0.
    return {name: value for name, value in inputs.items()}
