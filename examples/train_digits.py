#!/usr/bin/python3
"""Trains a small CNN on scikit-learn's bundled digits (8x8 images, 10 classes).

A real, deterministic workload for Lathe's checkpoint capture and resume:

  lathe run --checkpoint-dir ckpt --retry 2 -- /usr/bin/python3 examples/train_digits.py

- Every --ckpt-every steps it saves model, optimizer, step and every RNG
  state with the atomic pattern (torch.save to a temp name, then os.replace),
  keeping the newest --keep files.
- When LATHE_RESUME_FROM names a checkpoint (Lathe sets it on a restart,
  after putting the checkpoint back), it continues from there. The run is
  bitwise reproducible: an interrupted and resumed run ends with exactly the
  loss of an uninterrupted one.
- Under torchrun (WORLD_SIZE above 1, e.g. `lathe run --nodes 2 --torchrun`)
  it trains data-parallel: gloo process group, DistributedDataParallel, and
  each rank takes its own slice of --batch/WORLD_SIZE samples of the same
  global batch of --batch that one process would draw. The gradient is the
  same mean over the same samples, so the losses match a one-process run up
  to float summation order (not bitwise). The printed loss is the global
  batch's; only rank 0 writes checkpoints and --out; every rank resumes from
  LATHE_RESUME_FROM. Each rank prints its rank, node and slice at the start.

Needs only Debian packages: python3-torch, python3-sklearn. No downloads.
"""
import argparse
import json
import os
import shutil
import socket
import sys
import time

import torch
import torch.distributed as dist


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=600, help="training steps in all")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--ckpt-every", type=int, default=50, help="steps between checkpoints")
    p.add_argument("--ckpt-dir", default=os.environ.get("LATHE_CHECKPOINT_DIR", "ckpt"))
    p.add_argument("--keep", type=int, default=2, help="checkpoint files to keep")
    p.add_argument("--step-sleep", type=float, default=0.0,
                   help="seconds to sleep per step (to make a short run last)")
    p.add_argument("--out", help="write the final step, loss and accuracy here (JSON)")
    p.add_argument("--data", help="the digits as an .npz (images, target) instead of sklearn's")
    p.add_argument("--handler", help="copy this serving handler (examples/digits_inference.py) "
                   "into the checkpoint directory, so that every snapshot holds it")
    return p.parse_args()


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(1, 16, 3, padding=1)
        self.conv2 = torch.nn.Conv2d(16, 32, 3, padding=1)
        self.fc = torch.nn.Linear(32 * 4 * 4, 10)

    def forward(self, x):
        x = torch.relu(self.conv1(x))
        x = torch.nn.functional.max_pool2d(torch.relu(self.conv2(x)), 2)
        return self.fc(x.flatten(1))


def digits(path):
    """sklearn's digits, or the same arrays from an .npz (an image without sklearn)."""
    if path:
        import numpy
        with numpy.load(path) as f:
            return f["images"], f["target"]
    from sklearn.datasets import load_digits
    d = load_digits()
    return d.images, d.target


def data(seed, path=None):
    images, target = digits(path)
    x = torch.tensor(images, dtype=torch.float32).unsqueeze(1) / 16.0
    y = torch.tensor(target, dtype=torch.long)
    perm = torch.randperm(len(y), generator=torch.Generator().manual_seed(seed))
    x, y = x[perm], y[perm]
    n_train = int(0.8 * len(y))
    return (x[:n_train], y[:n_train]), (x[n_train:], y[n_train:])


def save(path, state):
    tmp = path + ".tmp"
    torch.save(state, tmp)
    with open(tmp, "rb") as f:
        os.fsync(f.fileno())
    os.replace(tmp, path)


def prune(ckpt_dir, keep):
    files = sorted(f for f in os.listdir(ckpt_dir) if f.startswith("ckpt_") and f.endswith(".pt"))
    for f in files[:-keep] if keep > 0 else []:
        os.remove(os.path.join(ckpt_dir, f))


# Every tensor handed to gloo, kept alive to the end of the process. In torch 1.13 a gloo worker
# thread drops its reference to a collective's tensor only after the collective has returned; if
# Python had let go of the tensor first, that last drop takes the GIL, and destroying the process
# group (which joins those threads, on the main thread, holding the GIL) then deadlocks at exit.
IN_GLOO = []


def global_loss(loss, world):
    """The loss over the whole global batch: the mean of the ranks' means (equal slices)."""
    if world == 1:
        return loss
    total = loss.detach().clone()
    dist.all_reduce(total)
    IN_GLOO.append(total)
    return total / world


def main():
    a = parse_args()
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if a.batch % world:
        sys.exit(f"--batch {a.batch} is not a multiple of WORLD_SIZE {world}")
    share = a.batch // world  # this rank's samples of each global batch
    rank = 0
    if world > 1:
        dist.init_process_group("gloo")
        rank = dist.get_rank()
        node = os.environ.get("SLURMD_NODENAME") or socket.gethostname()
        print(f"rank {rank} of {world} on node {node}: samples {rank * share} to "
              f"{(rank + 1) * share - 1} of each batch of {a.batch}", flush=True)
    torch.set_num_threads(1)  # one thread: the same sums in the same order every time
    torch.use_deterministic_algorithms(True)
    torch.manual_seed(a.seed)  # the same seed on every rank: the same start and batches
    (xtr, ytr), (xte, yte) = data(a.seed, a.data)
    net = Net()
    opt = torch.optim.SGD(net.parameters(), lr=a.lr, momentum=0.9)
    batches = torch.Generator().manual_seed(a.seed + 1)
    step = 0

    resume = os.environ.get("LATHE_RESUME_FROM")
    if resume:
        state = torch.load(resume)
        net.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        batches.set_state(state["batch_rng"])
        torch.set_rng_state(state["torch_rng"])
        step = state["step"]
        print(f"resumed from {resume} at step {step}", flush=True)
    start_step = step
    # After a resume: DDP starts every rank from rank 0's parameters (all loaded the same).
    model = torch.nn.parallel.DistributedDataParallel(net) if world > 1 else net

    if rank == 0:
        os.makedirs(a.ckpt_dir, exist_ok=True)
    if a.handler and rank == 0:
        target = os.path.join(a.ckpt_dir, os.path.basename(a.handler))
        shutil.copyfile(a.handler, target + ".tmp")
        os.replace(target + ".tmp", target)
    loss = torch.tensor(float("nan"))
    while step < a.steps:
        idx = torch.randint(0, len(ytr), (a.batch,), generator=batches)
        if world > 1:
            idx = idx[rank * share:(rank + 1) * share]
        loss = torch.nn.functional.cross_entropy(model(xtr[idx]), ytr[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        step += 1
        if step % 10 == 0:
            shown = global_loss(loss, world)
            if rank == 0:
                print(f"step {step} loss {shown.item():.6f}", flush=True)
        if rank == 0 and (step % a.ckpt_every == 0 or step == a.steps):
            save(os.path.join(a.ckpt_dir, f"ckpt_{step:06d}.pt"),
                 {"model": net.state_dict(), "optimizer": opt.state_dict(), "step": step,
                  "batch_rng": batches.get_state(), "torch_rng": torch.get_rng_state()})
            prune(a.ckpt_dir, a.keep)
        if a.step_sleep:
            time.sleep(a.step_sleep)

    loss = global_loss(loss, world)
    if world > 1:
        del model  # DDP's reducer holds the process group: both go here, while IN_GLOO lives
        dist.destroy_process_group()
    if rank != 0:
        return 0
    with torch.no_grad():
        acc = (net(xte).argmax(1) == yte).float().mean().item()
    result = {"step": step, "start_step": start_step, "loss": loss.item(),
              "loss_hex": float(loss.item()).hex(), "accuracy": acc}
    print(f"final step {step} loss {loss.item():.6f} ({result['loss_hex']}) "
          f"test accuracy {acc:.4f}", flush=True)
    if a.out:
        with open(a.out + ".tmp", "w") as f:
            json.dump(result, f)
        os.replace(a.out + ".tmp", a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
