#!/usr/bin/python3
"""samples/cnn_digits.cpp's network in PyTorch, for the accuracy it reaches.

Same data (scikit-learn's digits.csv.gz, the first 1440 images to train, the
other 357 to test), same layers (3x3 convolutions 1->16 and 16->32, SAME, ReLU,
2x2 max pooling, a dense layer 128->10), He-normal init, softmax cross-entropy,
SGD with momentum 0.9 and step 0.05 on batches of 240, 40 epochs.

    /usr/bin/python3 tools/cnn_digits_torch.py [--epochs N] [--seed S]
"""
import argparse
import gzip

import numpy as np
import torch
import torch.nn.functional as F

p = argparse.ArgumentParser()
p.add_argument("--epochs", type=int, default=40)
p.add_argument("--seed", type=int, default=0)
p.add_argument("--data", default="/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz")
a = p.parse_args()
torch.manual_seed(a.seed)
rows = np.loadtxt(gzip.open(a.data), delimiter=",", dtype=np.float32)
x = torch.tensor(rows[:, :64] / 16.0).reshape(-1, 1, 8, 8)
y = torch.tensor(rows[:, 64]).long()
train, batch = 1440, 240


def he(*shape, fan_in):
    return (torch.randn(*shape) * (2.0 / fan_in) ** 0.5).requires_grad_()


params = [he(16, 1, 3, 3, fan_in=9), torch.zeros(16, requires_grad=True),
          he(32, 16, 3, 3, fan_in=144), torch.zeros(32, requires_grad=True),
          he(2 * 2 * 32, 10, fan_in=128), torch.zeros(10, requires_grad=True)]


def logits(p, xb):
    h = F.max_pool2d(F.relu(F.conv2d(xb, p[0], p[1], padding=1)), 2)
    h = F.max_pool2d(F.relu(F.conv2d(h, p[2], p[3], padding=1)), 2)
    # NHWC order of the flattened features, as the C++ sample's.
    return h.permute(0, 2, 3, 1).reshape(len(xb), -1) @ p[4] + p[5]


opt = torch.optim.SGD(params, lr=0.05, momentum=0.9)
for e in range(a.epochs):
    for b in range(train // batch):
        xb, yb = x[b * batch:(b + 1) * batch], y[b * batch:(b + 1) * batch]
        opt.zero_grad()
        F.cross_entropy(logits(params, xb), yb).backward()
        opt.step()
with torch.no_grad():
    acc = (logits(params, x[train:]).argmax(-1) == y[train:]).float().mean().item()
print(f"PyTorch: test accuracy after {a.epochs} epochs: {acc:.4f}")
