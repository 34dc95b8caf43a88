"""Writes a small TorchScript MLP (4 → 16 → 3) to the path given (default model.pt)."""
import os
import sys

import torch

out = sys.argv[1] if len(sys.argv) > 1 else "model.pt"
os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3)).eval()
# TorchScript, not torch.save: LibTorch cannot rebuild Python classes from a pickle.
torch.jit.script(model).save(out)
print("wrote", out)
