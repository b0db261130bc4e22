"""Sweeps: many configurations, each trained as a normal run, on a thread pool or a Dask cluster.

:func:`sweep` expands a grid of dotted config keys (:mod:`nnjit.experiment.grid`) or takes a
list of :class:`RunConfig`\\ s, trains each one with :func:`~nnjit.experiment.train_run.train_run`
(its own run folder ``<root>/<config hash>`` with ``run.yaml``, ``idps.csv`` and checkpoints,
exactly as ``nnjit train`` would write it) and returns a DataFrame: one row per configuration,
one column per grid key, the best epoch's metrics, the run folder, the status and the error.

Where the runs go:

- no ``client``: a thread pool of ``workers`` threads in this process. A fit is one compiled
  call without the GIL, so the threads train at the same time; the compiled loop is shared.
- ``client``: a ``dask.distributed.Client`` (a ``LocalCluster``, a scheduler address, a
  dask-jobqueue cluster), or a scheduler address as a string. What travels to a worker is the
  config's ``state()`` (a plain dict), the name of :func:`train_config` (a module-level
  function, pickled by reference) and, when ``data`` holds arrays, those arrays (sent to every
  worker once). Compiled functions never travel: each worker process compiles nnjit's loop
  on its first run (or loads it from numba's on-disk cache) and reuses it for every later run.
  The runs root must be a folder every worker can write (a shared file system on a real
  cluster); it is passed as an absolute path.

A run that fails (bad data, a shape that does not fit, a crash of the worker) is recorded with
its error (``"ValueError: ..."``) and the others go on. Every check that needs no training is
done before anything runs: the grid's keys, data for every configuration, two configurations
that are the same run, runs that already exist.

The table is also written, after every finished run, to
``<root>/sweeps/<sweep id>/results.csv`` (the sweep id is a hash of its run ids and data).
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np

from nnjit.experiment.config import RunConfig
from nnjit.experiment.excerpt import excerpt
from nnjit.experiment.grid import GridPoint, config_value, expand_grid, varying_keys

__all__ = ["EXISTING", "METRICS", "RunsExistError", "SweepData", "check_sweep",
           "import_distributed", "local_cluster", "sweep", "train_config"]

#: What to do with a configuration whose run folder already holds trained epochs: ``"error"``
#: (refuse the sweep before anything runs), ``"resume"`` (continue unfinished runs from their
#: ``last`` checkpoint; finished ones are reported as they are, status ``"finished"``) or
#: ``"overwrite"`` (delete their history and checkpoints and train them again).
EXISTING = ("error", "resume", "overwrite")

#: Metrics of the best epoch reported per run (the columns of ``idps.csv`` that have values).
METRICS = ("train_loss", "train_accuracy", "val_loss", "val_accuracy")

#: Status of a run in the table.
OK, FINISHED, FAILED, INVALID = "ok", "finished", "failed", "invalid"

_EXTRA_HINT = "pip install 'nnjit[distributed]'"


class RunsExistError(ValueError):
    """``sweep(..., existing="error")`` where some configurations' runs already trained:
    ``runs`` lists ``(run id, epochs done)``, ``root`` is the runs root."""

    def __init__(self, runs: list[tuple[str, int]], root: Path):
        self.runs, self.root = runs, root
        listed = ", ".join(f"{i} ({n} epochs)" for i, n in runs[:10])
        more = f" and {len(runs) - 10} more" if len(runs) > 10 else ""
        super().__init__(f"sweep: {len(runs)} of the runs already exist in {root}: {listed}"
                         f"{more}; pass existing='resume' to continue unfinished ones and keep "
                         "finished ones, or existing='overwrite' to train them again")


def import_distributed():
    """The ``distributed`` module, or an ImportError that says how to install it."""
    try:
        import distributed
    except ImportError as e:
        raise ImportError(f"sweeps on a Dask cluster need dask and distributed: {_EXTRA_HINT} "
                          f"(without a client, sweep() runs on a thread pool) [{e}]") from e
    return distributed


def local_cluster(n_workers: int):
    """A ``distributed.LocalCluster`` of ``n_workers`` processes with one thread each, no
    dashboard and no memory limit (so a worker never spills data to disk); close it (``with``)
    when done."""
    distributed = import_distributed()
    return distributed.LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True,
                                    dashboard_address=None, memory_limit=0)


class SweepData:
    """Arrays every run of a sweep trains on: ``X, y`` and optionally ``X_val, y_val``."""

    def __init__(self, X, y, X_val=None, y_val=None):
        if (X_val is None) != (y_val is None):
            raise ValueError("sweep: data needs both X_val and y_val, or neither")
        self.X, self.y, self.X_val, self.y_val = X, y, X_val, y_val

    @classmethod
    def of(cls, data) -> SweepData:
        if isinstance(data, SweepData):
            return data
        if isinstance(data, (tuple, list)) and len(data) in (2, 4):
            return cls(*data)
        raise ValueError(f"sweep: data must be None (each config's 'data'), a data set name or "
                         f"CSV path, or a tuple (X, y) or (X, y, X_val, y_val) of arrays; got "
                         f"{excerpt(type(data).__name__, 60)}")

    def __reduce__(self):  # plain arrays travel, nothing else
        return (SweepData, (self.X, self.y, self.X_val, self.y_val))


# -- one run (on a worker) -----------------------------------------------------------------------
def _load_data(spec: str, config: RunConfig, target: str | None):
    """``(X, y, X_val, y_val, encoding)`` of a data spec, as ``nnjit train`` loads it."""
    from nnjit.experiment.data import load_run_data

    regression = not config.model.loss.builder().is_classification
    data = load_run_data(spec, regression, config.train.seed, target)
    if hasattr(data, "graph"):  # a graph trains full batch on its own masks
        return data.graph, None, None, None, None
    return data.X_train, data.y_train, data.X_val, data.y_val, data.encoding


def _best(history, config: RunConfig, has_val: bool) -> dict:
    """The best epoch of a run's history under its monitor and mode, and its metrics."""
    from nnjit.train.builtin_callbacks import resolve_mode

    monitor = config.train.monitor or ("val_loss" if has_val else "train_loss")
    out = {"epochs": len(history), "monitor": monitor}
    if monitor not in history or history[monitor].isna().all():
        return out
    mode = resolve_mode(monitor, config.train.mode, "sweep")
    column = history[monitor]
    row = history.loc[column.idxmin() if mode == "min" else column.idxmax()]
    out.update(best_epoch=int(row["epoch"]), best=float(row[monitor]))
    classification = config.model.loss.builder().is_classification
    for name in METRICS:  # a regression run logs accuracy 0.0: not a metric of it
        if name in row and not np.isnan(row[name]) and (classification or "accuracy" not in name):
            out[name] = float(row[name])
    return out


def train_config(task: dict, arrays: SweepData | None = None) -> dict:
    """Train one configuration of a sweep as a run; what runs on a worker.

    ``task`` is plain data: ``config`` (a ``RunConfig.state()``), ``root`` (absolute runs root),
    ``data`` (a data spec, or None with ``arrays``), ``target``, ``existing`` (see
    :data:`EXISTING`), ``metadata``. Never raises: returns ``status``, ``error``, the best
    epoch's metrics, ``seconds`` (wall time here) and ``worker`` (host:pid).
    """
    start = time.perf_counter()
    out = {"worker": f"{socket.gethostname()}:{os.getpid()}"}
    try:
        out.update(_train(task, arrays))
    except Exception as e:  # recorded, the sweep goes on
        out.update(status=FAILED, error=f"{type(e).__name__}: {e}", epochs=_epochs_written(task))
    out["seconds"] = time.perf_counter() - start
    return out


def _epochs_written(task: dict) -> int | None:
    """Epochs a failed run wrote to its ``idps.csv`` before it failed (None: no run folder)."""
    try:
        config = RunConfig.from_state(task["config"])
        from nnjit.experiment.run_folder import Run

        run = Run(task["root"], config.config_hash(), config)
        return len(run.history()) if (run.path / "run.yaml").is_file() else None
    except Exception:  # the run's own error is what the table reports
        return None


def _train(task: dict, arrays: SweepData | None) -> dict:
    from nnjit.experiment.data_fit import check_data_fits
    from nnjit.experiment.enums import Checkpoints
    from nnjit.experiment.run_errors import RunFinishedError
    from nnjit.experiment.run_folder import Run
    from nnjit.experiment.train_run import train_run
    from nnjit.random import seeded

    config = RunConfig.from_state(task["config"])
    run_id = config.config_hash()
    if arrays is not None:
        X, y, X_val, y_val, encoding = arrays.X, arrays.y, arrays.X_val, arrays.y_val, None
    else:
        X, y, X_val, y_val, encoding = _load_data(task["data"], config, task.get("target"))
    check_data_fits(config, X, y, y_val, task["data"] if arrays is None else "arrays")
    graph = getattr(X, "val_mask", None) is not None
    has_val = graph or (X_val is not None and len(X_val) > 0)
    root = task["root"]
    exists = (Path(root) / run_id / "run.yaml").is_file()
    existing = task["existing"]
    resume = Checkpoints.LAST if existing == "resume" and exists else None
    # seeded: this thread's own generator, so concurrent runs draw their initial weights as a
    # lone `nnjit train` would (set_seed is process-wide)
    with seeded(config.train.seed):
        try:
            run, _, history = train_run(config, X, y, X_val, y_val, root, resume=resume,
                                        overwrite=existing == "overwrite" and exists,
                                        metadata=task.get("metadata"), encoding=encoding)
            status = OK
        except RunFinishedError:
            run = Run.load(run_id, root)
            history, status = run.history(), FINISHED
    return {"status": status, **_best(history, config, has_val)}


# -- the sweep -----------------------------------------------------------------------------------
def _points(base_config, grid) -> tuple[list[GridPoint], list[str]]:
    """The grid points and the table's config columns."""
    if grid is not None:
        if not isinstance(base_config, (RunConfig, Mapping)):
            raise TypeError(f"sweep: with a grid, base_config must be a RunConfig or its "
                            f"state() mapping, got {type(base_config).__name__}")
        points = expand_grid(base_config, grid)
        return points, list(points[0].values)
    if isinstance(base_config, RunConfig):
        base_config = [base_config]
    if isinstance(base_config, (str, bytes, Mapping)) or not isinstance(base_config, Sequence) \
            or not base_config:
        raise TypeError("sweep: give a base config and a grid, or a non-empty list of "
                        f"RunConfigs; got {excerpt(type(base_config).__name__, 60)}")
    for i, config in enumerate(base_config):
        if not isinstance(config, RunConfig):
            raise TypeError(f"sweep: configs[{i}] must be a RunConfig, got "
                            f"{type(config).__name__}")
    keys = varying_keys(base_config)
    return [GridPoint({k: config_value(c, k) for k in keys}, c) for c in base_config], keys


def _describe(point: GridPoint) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in point.values.items()) or "the config"


def _check_runs(points: list[GridPoint], data, root: Path, existing: str) -> None:
    """Everything that can be checked before any run starts (ValueError naming the config)."""
    from nnjit.experiment.run_folder import Run

    if existing not in EXISTING:
        raise ValueError(f"sweep: existing must be one of {', '.join(map(repr, EXISTING))}, "
                         f"got {excerpt(existing, 40)}")
    seen: dict[str, GridPoint] = {}
    trained = []
    for point in points:
        config = point.config
        if config is None:
            continue
        run_id = config.config_hash()
        if run_id in seen:  # one folder for both: they would overwrite each other's files
            raise ValueError(f"sweep: configurations ({_describe(seen[run_id])}) and "
                             f"({_describe(point)}) are the same run {run_id}; give each "
                             "configuration once")
        seen[run_id] = point
        if data is None and not config.data:
            raise ValueError(f"sweep: configuration ({_describe(point)}) has no data: set "
                             "'data' in the config or pass data=")
        if (root / run_id / "run.yaml").is_file():
            done = Run(root, run_id, config).epochs_done()
            if done:
                trained.append((run_id, done))
    if trained and existing == "error":
        raise RunsExistError(trained, root)


def check_sweep(base_config, grid=None, data=None, *, root="runs", existing: str = "error"):
    """Every check :func:`sweep` makes before anything runs (same arguments and errors);
    returns ``(grid points, config columns)``. The command line calls it before it starts a
    cluster."""
    points, keys = _points(base_config, grid)
    if data is not None and not isinstance(data, str):
        SweepData.of(data)
    elif isinstance(data, str) and not data.strip():
        raise ValueError("sweep: data must be a data set name or path, not an empty string")
    _check_runs(points, data, Path(os.fspath(root)).resolve(), existing)
    return points, keys


def _sweep_id(points: list[GridPoint], data) -> str:
    ids = [p.config.config_hash() if p.config is not None else p.error for p in points]
    spec = data if data is None or isinstance(data, str) else "arrays"
    text = json.dumps({"runs": ids, "data": spec}, sort_keys=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def _row(point: GridPoint, result: dict, root_text: str) -> dict:
    row = dict(point.values)
    row["status"] = result.get("status", FAILED)
    row["run_folder"] = (os.path.join(root_text, point.config.config_hash())
                         if point.config is not None else "")
    for name in ("epochs", "best_epoch", "monitor", "best", *METRICS, "seconds", "worker"):
        row[name] = result.get(name)
    row["error"] = result.get("error") or ""
    return row


def _frame(rows: list[dict], keys: list[str]):
    import pandas as pd

    columns = [*keys, "status", "run_folder", "epochs", "best_epoch", "monitor", "best",
               *METRICS, "seconds", "worker", "error"]
    frame = pd.DataFrame(rows, columns=columns)
    empty = [m for m in METRICS if frame[m].isna().all()]
    frame = frame.drop(columns=empty)
    for name in ("epochs", "best_epoch"):
        frame[name] = frame[name].astype("Int64")
    return frame


def sweep(base_config, grid=None, data=None, client=None, *, root="runs",
          workers: int | None = None, existing: str = "error", target: str | None = None,
          on_result: Callable[[dict], None] | None = None):
    """Train every configuration of a grid (or a list) as a run; returns the table of results.

    Args:
        base_config: a :class:`RunConfig` (or its ``state()`` mapping) that ``grid`` varies, or
            a list of :class:`RunConfig`\\ s (then ``grid`` is None and the table's config
            columns are the keys whose values differ).
        grid: dotted config keys -> lists of values, e.g. ``{"optimizer.lr": [1e-3, 1e-2],
            "model.net.hidden_dims": [[64], [128]]}`` (:func:`~nnjit.experiment.grid.
            expand_grid`). A combination that is not a valid config is a row with status
            ``"invalid"`` and its error; a bad key raises ValueError before anything runs.
        data: ``None`` (each config's own ``data``: a built-in name, a CSV path or
            ``fashion_mnist:PATH``, loaded and split by the worker as ``nnjit train`` does),
            one such spec for every config (as ``nnjit train --data``), or arrays
            ``(X, y)`` / ``(X, y, X_val, y_val)`` (sent to every Dask worker once).
        client: ``None`` (a thread pool here), a ``dask.distributed.Client``, or a Dask
            scheduler address such as ``"tcp://10.0.0.5:8786"`` (connected to and closed).
        root: the runs root (default ``runs``); each config trains in ``root/<config hash>``.
        workers: threads of the pool without a client (default: the usable cores).
        existing: runs that already trained: ``"error"`` (default), ``"resume"`` or
            ``"overwrite"`` (:data:`EXISTING`).
        target: the target column of a CSV data spec (default: its last column).
        on_result: called with each finished row (a dict), in the order runs finish.

    Returns:
        A DataFrame in configuration order: one column per grid key, then ``status``
        (``ok``, ``finished``: an existing finished run under ``existing="resume"``,
        ``failed``, ``invalid``), ``run_folder``, ``epochs`` (trained in all; by a failed run:
        before it failed), ``best_epoch``, ``monitor`` and ``best`` (its value there), that
        epoch's ``train_loss``, ``train_accuracy``, ``val_loss``, ``val_accuracy`` (columns
        without any value are left out), ``seconds`` (wall time of the run on its worker),
        ``worker`` (host:pid) and ``error`` (``"Type: message"``).
        ``frame.attrs["results_csv"]`` is where it was saved.

    Raises:
        ValueError: a bad grid, base config, data or ``existing``; two configurations that
            are the same run; :class:`RunsExistError`: runs that trained already (with
            ``existing="error"``).
        ImportError: a client or address without ``dask``/``distributed`` installed.
    """
    from nnjit.io.atomic import atomic_write_text

    points, keys = check_sweep(base_config, grid, data, root=root, existing=existing)
    if data is not None and not isinstance(data, str):
        data = SweepData.of(data)
    root_text = os.fspath(root)
    root_path = Path(root_text).resolve()
    if client is not None and workers is not None:
        raise ValueError("sweep: workers= sizes the thread pool used without a client; a Dask "
                         "cluster has its own workers")
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int)
                                or workers < 1):
        raise ValueError(f"sweep: workers must be an int >= 1, got {excerpt(workers, 40)}")
    if client is not None:
        import_distributed()  # without the extra: say what to install, before anything runs
        if not isinstance(client, str) and not hasattr(client, "submit"):
            raise TypeError(f"sweep: client must be a dask.distributed.Client or a scheduler "
                            f"address, got {type(client).__name__}")
    folder = root_path / "sweeps" / _sweep_id(points, data)
    for link in (root_path / "sweeps", folder):  # (results.csv would be written through it)
        if link.is_symlink():
            raise ValueError(f"sweep: {link} is a symbolic link: nnjit does not follow links "
                             f"inside the runs root; replace it with a folder")
    csv_path = folder / "results.csv"
    rows = [_row(p, {"status": INVALID, "error": p.error}, root_text) if p.config is None
            else None for p in points]
    spec = data if isinstance(data, str) else None
    tasks = {i: {"config": p.config.state(), "root": str(root_path), "data": spec or
                 p.config.data, "target": target, "existing": existing,
                 "metadata": {"data": spec or p.config.data, "data_target": target,
                              "sweep": folder.name}}
             for i, p in enumerate(points) if p.config is not None}
    arrays = data if isinstance(data, SweepData) else None

    def save() -> None:
        done = [r for r in rows if r is not None]
        folder.mkdir(parents=True, exist_ok=True)
        atomic_write_text(csv_path, _frame(done, keys).to_csv(index=False))

    def finished(i: int, result: dict) -> None:
        rows[i] = _row(points[i], result, root_text)
        save()
        if on_result is not None:
            on_result(rows[i])

    save()  # a runs root that cannot be written fails here, before any run starts
    for row in rows:
        if row is not None and on_result is not None:
            on_result(row)
    if tasks:
        if client is None:
            _on_threads(tasks, arrays, workers, finished)
        else:
            _on_dask(tasks, arrays, client, finished)
    save()
    frame = _frame(rows, keys)
    frame.attrs["results_csv"] = str(csv_path)
    return frame


def _on_threads(tasks: dict, arrays, workers: int | None, finished) -> None:
    from concurrent.futures import ThreadPoolExecutor, as_completed

    if workers is None:
        workers = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") \
            else (os.cpu_count() or 1)
    pool = ThreadPoolExecutor(max_workers=min(workers, len(tasks)),
                              thread_name_prefix="nnjit-sweep")
    try:
        futures = {pool.submit(train_config, task, arrays): i for i, task in tasks.items()}
        for future in as_completed(futures):
            finished(futures[future], future.result())
    finally:  # on Ctrl-C the runs not started are dropped; running ones end their fit
        pool.shutdown(wait=False, cancel_futures=True)


def _on_dask(tasks: dict, arrays, client, finished) -> None:
    distributed = import_distributed()
    own = isinstance(client, str)
    if own:
        client = distributed.Client(client)
    futures = {}
    try:
        payload = None
        if arrays is not None:  # once to every worker, not once per run
            [payload] = client.scatter([arrays], broadcast=True, hash=False)
        for i, task in tasks.items():
            run_id = RunConfig.from_state(task["config"]).config_hash()
            futures[client.submit(train_config, task, payload, pure=False,
                                  key=f"nnjit-run-{run_id}-{os.urandom(4).hex()}")] = i
        for future in distributed.as_completed(list(futures)):
            try:
                result = future.result()
            except Exception as e:  # the worker died, the task could not be sent...
                result = {"status": FAILED, "error": f"{type(e).__name__}: {e}"}
            finished(futures[future], result)
    finally:
        if futures:
            client.cancel(list(futures))
        if own:
            client.close()
