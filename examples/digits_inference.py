"""A `process` handler for lathe serve: examples/train_digits.py's raw checkpoint, served.

train_digits.py --handler examples/digits_inference.py copies this file into the
checkpoint directory, so every checkpoint snapshot holds it beside the checkpoints:

    lathe run --checkpoint-dir ckpt -- /usr/bin/python3 examples/train_digits.py \
        --handler examples/digits_inference.py
    lathe model create digits --from <run> --handler digits_inference.py
    lathe model export digits/1 --to ~/models && lathe serve --repository ~/models
    curl -d '{"image": [[0, 0, 5, 13, 9, 1, 0, 0], ...]}' localhost:8000/predict?model=digits

A request is {"image": 8x8 pixel values 0..16} (scikit-learn's digits); the answer
{"digit": N, "probabilities": [10 floats]}. The checkpoint loaded is the one in
LATHE_MODEL_FILE (which `lathe model export` sets to the version's file), else the
newest ckpt_*.pt of the model directory.
"""
import glob
import os

import torch


class Net(torch.nn.Module):  # the same as train_digits.Net
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(1, 16, 3, padding=1)
        self.conv2 = torch.nn.Conv2d(16, 32, 3, padding=1)
        self.fc = torch.nn.Linear(32 * 4 * 4, 10)

    def forward(self, x):
        x = torch.relu(self.conv1(x))
        x = torch.nn.functional.max_pool2d(torch.relu(self.conv2(x)), 2)
        return self.fc(x.flatten(1))


def load(model_dir):
    torch.set_num_threads(1)
    name = os.environ.get("LATHE_MODEL_FILE")
    path = os.path.join(model_dir, name) if name else sorted(
        glob.glob(os.path.join(model_dir, "ckpt_*.pt")))[-1]
    state = torch.load(path, map_location="cpu")
    net = Net()
    net.load_state_dict(state["model"])
    net.eval()
    return net


def predict(batch, net):
    images = []
    for req in batch:
        image = req.get("image") if isinstance(req, dict) else None
        if not (isinstance(image, list) and len(image) == 8 and
                all(isinstance(row, list) and len(row) == 8 for row in image)):
            raise ValueError('a request is {"image": 8 rows of 8 pixel values 0..16}')
        images.append(image)
    x = torch.tensor(images, dtype=torch.float32).unsqueeze(1) / 16.0
    with torch.no_grad():
        p = torch.softmax(net(x), dim=1)
    return [{"digit": int(row.argmax()), "probabilities": row.tolist()} for row in p]
