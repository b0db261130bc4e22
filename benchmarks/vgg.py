"""The VGG-style net of issue 22, in nnjit and in PyTorch, and its convolutions timed one by one.

The net (``benchmarks.cnn``'s ``vgg`` row trains it): ``x.view(-1, 1, 28, 28)``;
``Conv2d(1, 32, 3, padding=1) - BatchNorm2d(32) - ReLU``; ``Conv2d(32, 32, 3, padding=1) -
ReLU``; ``MaxPool2d(2)``; ``Conv2d(32, 64, 3, padding=1) - BatchNorm2d(64) - ReLU``;
``MaxPool2d(2)``; flatten; ``Linear(64 * 7 * 7, 10)``. Both builds name their layers alike, so
nnjit's ``state_dict()`` loads into the torch module.

:func:`measure_layers` times each convolution's products alone at the training batch, per
direction (forward, weight gradient, input gradient; the first convolution's input is the data,
which needs no gradient): nnjit's conv kernels in one compiled loop
(:func:`benchmarks.conv_stack.direction_call`) and PyTorch's on one thread, against the 1-thread
float32 GEMM peak measured before and after them in the same run. FLOPs per product: ``2 * B * O
* OH * OW * C/g * KH * KW``.
"""

from __future__ import annotations

import numpy as np

from benchmarks.conv_stack import DIRECTIONS, KERNEL, between_peaks, direction_call
from benchmarks.scale import _best_seconds

#: The convolutions of the net: (name, in channels, out channels, image side), 3x3, padding 1.
CONVS = (("conv1", 1, 32, 28), ("conv2", 32, 32, 28), ("conv3", 32, 64, 14))


def nnjit_vgg(nj):
    """The net in nnjit (a fresh module; build it under ``nj.seeded`` for fixed weights)."""
    nn, F = nj.nn, nj.nn.functional

    class VGGNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(1, 32, 3, padding=1)
            self.bn1 = nn.BatchNorm2d(32)
            self.conv2 = nn.Conv2d(32, 32, 3, padding=1)
            self.conv3 = nn.Conv2d(32, 64, 3, padding=1)
            self.bn3 = nn.BatchNorm2d(64)
            self.pool1, self.pool2 = nn.MaxPool2d(2), nn.MaxPool2d(2)
            self.fc = nn.Linear(64 * 7 * 7, 10, init="torch")

        def forward(self, x):
            x = F.relu(self.bn1(self.conv1(x.view(-1, 1, 28, 28))))
            x = self.pool1(F.relu(self.conv2(x)))
            x = self.pool2(F.relu(self.bn3(self.conv3(x))))
            return self.fc(x.flatten(1))

    return VGGNet()


def torch_vgg():
    """The same net in PyTorch (its weights are overwritten with nnjit's)."""
    import torch
    F = torch.nn.functional

    class VGGNet(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = torch.nn.Conv2d(1, 32, 3, padding=1)
            self.bn1 = torch.nn.BatchNorm2d(32)
            self.conv2 = torch.nn.Conv2d(32, 32, 3, padding=1)
            self.conv3 = torch.nn.Conv2d(32, 64, 3, padding=1)
            self.bn3 = torch.nn.BatchNorm2d(64)
            self.pool1, self.pool2 = torch.nn.MaxPool2d(2), torch.nn.MaxPool2d(2)
            self.fc = torch.nn.Linear(64 * 7 * 7, 10)

        def forward(self, x):
            x = F.relu(self.bn1(self.conv1(x.view(-1, 1, 28, 28))))
            x = self.pool1(F.relu(self.conv2(x)))
            x = self.pool2(F.relu(self.bn3(self.conv3(x))))
            return self.fc(x.flatten(1))

    return VGGNet()


def _torch_call(torch, c, o, size, direction, batch):
    """``call(steps)``: ``steps`` runs of PyTorch's kernel for one direction of the convolution
    :func:`benchmarks.conv_stack.direction_call` times. The gradients come from
    ``aten.convolution_backward``, the call its autograd makes, asked for the one gradient
    (as nnjit's kernel is); the forward runs without autograd, as a kernel alone."""
    rng = np.random.default_rng(0)
    f32 = np.float32
    x = torch.from_numpy(rng.standard_normal((batch, c, size, size), dtype=f32))
    w = torch.from_numpy(rng.standard_normal((o, c, KERNEL, KERNEL), dtype=f32) * f32(0.05))
    b = torch.zeros(o)
    dy = torch.from_numpy(rng.standard_normal((batch, o, size, size), dtype=f32))
    backward = torch.ops.aten.convolution_backward
    mask = [direction == "input gradient", direction == "weight gradient", False]

    def call(steps):
        with torch.no_grad():
            for _ in range(steps):
                if direction == "forward":
                    torch.nn.functional.conv2d(x, w, b, padding=1)
                else:
                    backward(dy, x, w, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1, mask)

    return call


def measure_layers(torch, batch: int, repeats: int = 5, min_trial_s: float = 0.3,
                   peak_trials: int = 5) -> dict:
    """Seconds, GFLOP/s and fraction of the 1-thread GEMM peak of every convolution product of
    the net on ``batch`` images, nnjit's and PyTorch's (on the threads the caller gave it:
    ``benchmarks.cnn`` sets 1), each the best of ``repeats`` trials of >= ``min_trial_s``.

    Returns ``{"rows": [{"layer", "shape", "direction", "algorithm", "flops", "seconds",
    "gflops", "fraction_of_peak"}, ...], "step": the same sums over one training step's
    products, "gemm_peak_gflops", "gemm_peak_route", "batch", "torch_threads"}``; ``seconds``,
    ``gflops`` and ``fraction_of_peak`` are ``{"nnjit": ..., "PyTorch": ...}``."""
    def measure():
        rows = []
        for k, (name, c, o, size) in enumerate(CONVS):
            # the first convolution reads the data, which needs no gradient
            for direction in DIRECTIONS if k else DIRECTIONS[:2]:
                call, flops, algorithm = direction_call(c, o, size, direction, batch)
                seconds = {
                    "nnjit": _best_seconds(call, repeats, min_trial_s),
                    "PyTorch": _best_seconds(_torch_call(torch, c, o, size, direction, batch),
                                             repeats, min_trial_s)}
                rows.append({"layer": name, "shape": f"{c}->{o}, {size}x{size}",
                             "direction": direction, "algorithm": algorithm, "flops": flops,
                             "seconds": seconds})
        return rows

    rows, peak = between_peaks(measure, peak_trials)
    step = {"layer": "all", "shape": "", "direction": "one training step",
            "flops": sum(r["flops"] for r in rows),
            "seconds": {k: sum(r["seconds"][k] for r in rows) for k in ("nnjit", "PyTorch")}}
    for r in (*rows, step):
        r["gflops"] = {k: r["flops"] / s / 1e9 for k, s in r["seconds"].items()}
        r["fraction_of_peak"] = {k: g / peak["peak_gflops"] for k, g in r["gflops"].items()}
    return {"rows": rows, "step": step, "gemm_peak_gflops": peak["peak_gflops"],
            "gemm_peak_route": peak["best_route"], "batch": batch,
            "torch_threads": torch.get_num_threads()}
