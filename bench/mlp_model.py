"""The TorchScript MLPs the serving benchmarks load (serve_bench.py, front_bench.sh).

Run it with the Python that has python3-torch:
    /usr/bin/python3 bench/mlp_model.py OUT.pt=64,256,256,10 [OUT2.pt=512,2048,2048,512 ...]
Each argument is a file and the layer sizes of a model (Linear layers with a ReLU
between them). The weights are random from seed 0, the models made in the order given,
so the same arguments always give the same files.
"""
import sys

import torch


def mlp(*sizes):
    layers = []
    for a, b in zip(sizes, sizes[1:]):
        layers += [torch.nn.Linear(a, b), torch.nn.ReLU()]
    return torch.nn.Sequential(*layers[:-1]).eval()


def main(specs):
    torch.manual_seed(0)
    for spec in specs:
        path, _, sizes = spec.rpartition("=")
        torch.jit.script(mlp(*map(int, sizes.split(",")))).save(path)


if __name__ == "__main__":
    main(sys.argv[1:])
