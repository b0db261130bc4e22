"""A 3x3 convolution stack's forward + backward FLOP rate against the 1-thread GEMM peak.

Workload (issue 13): ``Conv2d(32, 64, 3, padding=1) - Conv2d(64, 64, 3, padding=1)`` on a batch
of 64 images 32x32 with 32 channels, float32, BLAS on 1 thread. One step is both forwards, both
weight and bias gradients and the second layer's input gradient (the first layer's input is data:
no gradient), run by nnjit's compiled conv kernels (:mod:`nnjit.kernels.conv`, the calls the
interpreter's dispatcher makes) in one compiled loop. FLOPs counted: ``2 * B * O * OH * OW *
C/g * kH * kW`` per product (forward, weight gradient, input gradient); the GEMM peak is
:func:`benchmarks.scale.gemm_peak` (float32 1024^3, best route, best of trials).

``python -m benchmarks.conv_stack`` prints the result; :func:`measure_conv_stack` returns it
(the ``cnn`` benchmark calls it). :func:`direction_call` times one direction of one convolution
the same way and :func:`between_peaks` brackets a measurement with the peak (the ``cnn``
benchmark's VGG-style layers, :mod:`benchmarks.vgg`).
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from nnjit.kernels import conv as kc
from nnjit.kernels import conv_winograd as kwino
from nnjit.kernels._jit import jit

BATCH = 64
IMAGE = 32
LAYERS = ((32, 64), (64, 64))  # (in_channels, out_channels), 3x3, padding 1, stride 1
KERNEL = 3
TARGET_FRACTION = 0.80  # (issue 22; issue 13's was 0.70)
#: What :func:`direction_call` can time, in the order of its compiled loop's codes.
DIRECTIONS = ("forward", "weight gradient", "input gradient")


@jit
def _run_steps(x, w1, b1, y1, w2, b2, y2, dy2, dy1, dw1, db1, dw2, db2, hyper, h1, h2, scratch,
               steps):
    """``steps`` forward + backward steps of the stack through the conv kernels, one compiled
    loop (nnjit's options, cached on disk like the kernels it calls)."""
    for _ in range(steps):
        kc.conv2d_forward(x, w1, b1, y1, True, hyper, h1, scratch)
        kc.conv2d_forward(y1, w2, b2, y2, True, hyper, h2, scratch)
        kc.conv2d_backward(y1, w2, dy2, dy1, dw2, db2, True, False, True, False, True,
                           False, hyper, h2, scratch)
        kc.conv2d_backward(x, w1, dy1, dy1, dw1, db1, False, False, True, False, True,
                           False, hyper, h1, scratch)


@jit
def _run_direction(x, w, b, y, dy, dx, dwt, db, direction, hyper, scratch, steps):
    """``steps`` runs of one direction (its index in DIRECTIONS) of one convolution through the
    conv kernels, one compiled loop; the gradients alone, without the bias's. The block's row
    is an int32, as the conv family passes it, so the kernels' builds are the family's."""
    weight = direction == 1
    for _ in range(steps):
        if direction == 0:
            kc.conv2d_forward(x, w, b, y, True, hyper, np.int32(0), scratch)
        else:
            kc.conv2d_backward(x, w, dy, dx, dwt, db, not weight, False, weight, False, False,
                               False, hyper, np.int32(0), scratch)


@jit
def _run_winograd_direction(x, w, b, y, dy, dx, dwt, db, direction, c, size, o, scratch, steps):
    """:func:`_run_direction` for a layer of the "winograd" algorithm (the conv_winograd
    family's kernels, 3x3, padding 1)."""
    for _ in range(steps):
        if direction == 0:
            kwino.forward(x, w, b, y, True, c, size, size, o, 1, 1, size, size, scratch)
        else:
            kwino.backward(x, w, dy, dx, dwt, db, direction == 2, direction == 1, False, c, size,
                           size, o, 1, 1, size, size, scratch)


def _layer(c, o, size, algorithm, batch=BATCH):
    """The geometry block (as ``nnjit.ops.conv`` records it), scratch elements and FLOPs of one
    product of a 3x3 padding-1 convolution ``c -> o`` on ``batch`` images ``size x size``."""
    from nnjit.ops.conv import ALGORITHMS

    algo = ALGORITHMS[algorithm]
    block = (c, size, size, o, KERNEL, KERNEL, 1, 1, 1, 1, 1, 1, 1, size, size, algo,
             kc.samples_for(c, KERNEL, KERNEL, size, size, o, 1, 1, algo))
    scratch = kc.scratch_elements(c, KERNEL, KERNEL, size, size, o, 1, 1, 1, 1, algo)
    flops = 2.0 * batch * o * size * size * c * KERNEL * KERNEL
    return block, scratch, flops


def direction_call(c, o, size, direction, batch=BATCH):
    """``(call, flops, algorithm)`` for one direction (one of DIRECTIONS) of a 3x3 padding-1
    convolution ``c -> o`` on ``batch`` float32 images ``size x size``: ``call(steps)`` runs
    nnjit's conv kernel ``steps`` times in one compiled loop (the algorithm nnjit chooses for
    the shape: "winograd" where a layer of it would record CONV2D_WINOGRAD, else the conv
    family's), ``flops`` is one run's (the direct convolution's, whatever the algorithm)."""
    from nnjit.ops.conv import choose_algorithm

    rng = np.random.default_rng(0)
    f32 = np.float32
    algorithm = choose_algorithm(c, KERNEL, KERNEL, o)
    if choose_algorithm(c, KERNEL, KERNEL, o, (1, 1), (size, size)) == "winograd":
        algorithm = "winograd"
    block, n_scratch, flops = _layer(c, o, size, algorithm, batch)
    x = rng.standard_normal(batch * c * size * size).astype(f32)
    w = (rng.standard_normal(o * c * KERNEL * KERNEL) * 0.05).astype(f32)
    y = np.zeros(batch * o * size * size, f32)
    dy = rng.standard_normal(y.size).astype(f32)
    args = (x, w, np.zeros(o, f32), y, dy, np.zeros_like(x), np.zeros_like(w), np.zeros(o, f32),
            DIRECTIONS.index(direction))
    if algorithm == "winograd":
        wargs = (*args, c, size, o, np.zeros(n_scratch, f32))
        return (lambda steps: _run_winograd_direction(*wargs, steps)), flops, algorithm
    args = (*args, np.array(block, np.float64), np.zeros(n_scratch, f32))
    return (lambda steps: _run_direction(*args, steps)), flops, algorithm


def _conv_stack_seconds(repeats: int, min_trial_s: float) -> tuple[float, dict, float]:
    """Best seconds per step, the algorithm per layer, FLOPs per step."""
    from nnjit.ops.conv import choose_algorithm

    rng = np.random.default_rng(0)
    f32 = np.float32
    (c1, o1), (c2, o2) = LAYERS
    algos = {f"conv{k + 1} {c}->{o}": choose_algorithm(c, KERNEL, KERNEL, o)
             for k, (c, o) in enumerate(LAYERS)}
    a1, a2 = algos.values()
    block1, s1, f1 = _layer(c1, o1, IMAGE, a1)
    block2, s2, f2 = _layer(c2, o2, IMAGE, a2)
    # forward of both, weight gradients of both, the second layer's input gradient
    flops = f1 + f2 + f1 + f2 + f2
    hyper = np.array(block1 + block2, np.float64)
    px = IMAGE * IMAGE
    x = rng.standard_normal(BATCH * c1 * px).astype(f32)
    w1 = (rng.standard_normal(o1 * c1 * 9) * 0.05).astype(f32)
    w2 = (rng.standard_normal(o2 * c2 * 9) * 0.05).astype(f32)
    b1, b2 = np.zeros(o1, f32), np.zeros(o2, f32)
    y1, y2 = np.zeros(BATCH * o1 * px, f32), np.zeros(BATCH * o2 * px, f32)
    dy2 = rng.standard_normal(y2.size).astype(f32)
    dy1 = np.zeros(y1.size, f32)
    dw1, dw2, db1, db2 = np.zeros_like(w1), np.zeros_like(w2), np.zeros_like(b1), np.zeros_like(b2)
    scratch = np.zeros(max(s1, s2), f32)
    run = _run_steps
    # Block rows as int32, as the conv family passes them: the kernels' float32 builds are shared.
    args = (x, w1, b1, y1, w2, b2, y2, dy2, dy1, dw1, db1, dw2, db2, hyper, np.int32(0),
            np.int32(len(block1)), scratch)
    run(*args, 1)  # compile, warm
    t0 = time.perf_counter()
    run(*args, 1)
    steps = max(1, int(min_trial_s / max(time.perf_counter() - t0, 1e-6)))
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        run(*args, steps)
        best = min(best, (time.perf_counter() - t0) / steps)
    return best, algos, flops


def between_peaks(measure, peak_trials: int = 5):
    """``measure()`` with BLAS pinned to 1 thread, between two measurements of the 1-thread
    float32 GEMM peak (:func:`benchmarks.scale.gemm_peak`, 1024^3, ``peak_trials`` trials each).
    Returns ``(measure's result, the better of the two peaks' dicts)``."""
    from threadpoolctl import threadpool_limits

    import nnjit.train.threads  # noqa: F401  (loads the BLAS numba calls: the limit must see it)
    from benchmarks.scale import gemm_peak

    with threadpool_limits(limits=1):
        peak_start = gemm_peak(1024, peak_trials, 0.2)
        result = measure()
        peak_end = gemm_peak(1024, peak_trials, 0.2)
    return result, max(peak_start, peak_end, key=lambda p: p["peak_gflops"])


def measure_conv_stack(repeats: int = 5, min_trial_s: float = 0.5, peak_trials: int = 5) -> dict:
    """Forward + backward GFLOP/s of the 3x3 stack and the 1-thread float32 GEMM peak, both
    with BLAS pinned to 1 thread (best of ``repeats`` trials of >= ``min_trial_s`` each, the
    peak measured before and after: the better one is used).

    Returns ``{"gflops", "seconds_per_step", "flops_per_step", "gemm_peak_gflops",
    "fraction_of_peak", "target_fraction", "algorithms", "workload"}``."""
    (seconds, algos, flops), peak = between_peaks(
        lambda: _conv_stack_seconds(repeats, min_trial_s), peak_trials)
    gflops = flops / seconds / 1e9
    return {
        "gflops": gflops,
        "seconds_per_step": seconds,
        "flops_per_step": flops,
        "gemm_peak_gflops": peak["peak_gflops"],
        "gemm_peak_route": peak["best_route"],
        "fraction_of_peak": gflops / peak["peak_gflops"],
        "target_fraction": TARGET_FRACTION,
        "algorithms": algos,
        "workload": (f"batch {BATCH}, {LAYERS[0][0]}x{IMAGE}x{IMAGE} input, 3x3 padding 1: "
                     + " - ".join(f"Conv2d({c}, {o})" for c, o in LAYERS)
                     + ", float32, forward + backward (no input gradient for the data)"),
    }


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args(argv)
    res = measure_conv_stack(repeats=args.repeats)
    if args.json:
        print(json.dumps(res, indent=2))
    else:
        print(res["workload"])
        for layer, algo in res["algorithms"].items():
            print(f"  {layer}: {algo}")
        print(f"forward + backward: {res['gflops']:.1f} GFLOP/s "
              f"({res['seconds_per_step'] * 1e3:.2f} ms per step)")
        print(f"1-thread float32 GEMM peak: {res['gemm_peak_gflops']:.1f} GFLOP/s "
              f"({res['gemm_peak_route']})")
        print(f"fraction of peak: {res['fraction_of_peak']:.1%} (target "
              f">= {res['target_fraction']:.0%})")
    return res


if __name__ == "__main__":
    main()
