"""``train_run``: train a :class:`~nnjit.experiment.config.RunConfig` as a run folder
(:mod:`nnjit.experiment.run_folder`), written after every epoch by its
:class:`~nnjit.experiment.run_callback.RunCallback`.

A run that has trained is never restarted silently: :func:`train_run` on it raises
:class:`~nnjit.experiment.run_errors.RunExistsError` unless given ``resume=`` (continue from a
checkpoint) or ``overwrite=True`` (delete its history, report and checkpoints, then train from
scratch).

Example:
    >>> run, trainer, history = train_run(config, X, y, X_val, y_val, root="runs")
    >>> run, trainer, history = train_run(config, X, y, X_val, y_val, root="runs",
    ...                                   resume=Checkpoints.LAST)   # after a crash
"""

from __future__ import annotations

import warnings

from nnjit.checks import Int
from nnjit.experiment.config import RunConfig
from nnjit.experiment.enums import Checkpoints
from nnjit.experiment.run_callback import RunCallback
from nnjit.experiment.run_errors import (
    NoCheckpointError,
    ResumeFromStartWarning,
    RunExistsError,
    RunFinishedError,
)
from nnjit.experiment.run_folder import Run
from nnjit.train.builtin_callbacks import EarlyStopping
from nnjit.train.callbacks import Callback

__all__ = ["train_run"]


def train_run(config: RunConfig, X, y, X_val=None, y_val=None, root="runs", *,
              resume=None, overwrite: bool = False, epochs: int | None = None, callbacks=(),
              verbose=False, name: str | None = None, log_batches: bool = False,
              metadata: dict | None = None, encoding=None, distributed=None):
    """Train ``config`` on the data as a run under ``root``; returns ``(run, trainer, history)``.

    ``X`` may be a :class:`nnjit.Graph` (with ``y=None``): a graph net (``Nets.GRAPH_*``) then
    trains full batch on its ``train_mask`` and validates on its ``val_mask``.

    Args:
        resume: ``None`` to start from scratch, or a :class:`Checkpoints` phase (``LAST`` or
            ``BEST``) to continue the existing run from: weights, optimizer, RNG, shuffle
            order, scheduler position, early-stopping counters (the compiled rule's and
            :class:`EarlyStopping`'s) and the best weights come back, so 5 epochs then a resume
            for 5 more equals 10 epochs bit for bit (weights and ``idps.csv`` but ``seconds``),
            however many times a run is resumed. Rows of ``idps.csv`` after that checkpoint's
            epoch are dropped. A run stopped before it wrote any checkpoint (killed during its
            first epoch) trains from the start, with a :class:`ResumeFromStartWarning`.
        overwrite: train an existing run again from scratch, first deleting its ``idps.csv``,
            report, encoding and checkpoints. Without it (and without ``resume``), a run that
            has trained any epoch is never touched: :class:`RunExistsError`.
        epochs: the epoch to stop after, counting the epochs a resumed run already did
            (default ``config.train.epochs``): ``epochs=5`` trains 5 epochs of a new run, or
            continues a resumed run to epoch 5; more than ``config.train.epochs`` continues a
            finished run. The scheduler always spans ``config.train.epochs`` and the quarter
            checkpoints stay at its phases (the run's id is still its config's hash).
        callbacks: more callbacks. Those with a :meth:`~Callback.state` run before the run
            writes its checkpoints (so the checkpoints hold their state), the others after.
        log_batches: also write a row per training batch to ``idps.csv``
            (:meth:`Run.batch_history`).
        metadata: extra entries for ``metadata.yaml``.
        encoding: the :class:`~nnjit.data.tabular_encoding.TabularEncoding` that made ``X`` from a
            table (``TabularDataset.encoding``): saved as ``encoding.json`` and in every
            checkpoint, so new rows can be encoded the same way (``nnjit predict``). A resumed
            run keeps its saved one (a different one is a ValueError).
        distributed: :class:`nnjit.MPI` to train data-parallel: call ``train_run`` on every rank
            with the same arguments; rank 0 alone writes the run folder (``run.yaml``,
            ``idps.csv``, checkpoints), every rank reads a resumed run's checkpoint.

    Raises:
        RunExistsError: the run exists and neither ``resume`` nor ``overwrite`` was given.
        NoCheckpointError: ``resume`` on a run that does not exist, or names a checkpoint the
            run has not saved while it saved others.
        RunFinishedError: ``resume`` on a run already at ``epochs`` (or at
            ``config.train.epochs``), or ended by early stopping.
        ValueError: the run's folder holds another config; both ``resume`` and ``overwrite``.

    Nothing in the run folder changes before these checks pass. Then the temporary files a
    killed process left in it are removed (:meth:`Run.remove_stale_temp_files`).

    ``history`` is the whole run's ``idps.csv`` as a DataFrame. Early stopping follows
    ``config.train``: the trainer's compiled rule when the monitor is ``val_loss``,
    ``val_accuracy`` or ``train_loss`` and the mode matches, else :class:`EarlyStopping`.
    """
    from nnjit.data.loader import DataLoader
    from nnjit.train.fit_plan import MONITORS

    if not isinstance(config, RunConfig):
        raise TypeError(f"train_run: config must be a RunConfig, got {type(config).__name__}")
    tc = config.train
    target = tc.epochs if epochs is None else _epochs(epochs)
    run = Run(root, config.config_hash() if name is None else name, config)
    run._check_config()
    if resume is None:
        done = run.epochs_done() if (run.path / "run.yaml").is_file() else 0
        if done and not overwrite:
            raise RunExistsError(run, done)
    else:
        if overwrite:
            raise ValueError("train_run: resume= continues a run and overwrite=True starts it "
                             "again: pass one of them")
        resume = Checkpoints.get(resume)
        if (run.path / "run.yaml").is_file() and not run.saved_phases():
            redo = len(run.history())
            warnings.warn(ResumeFromStartWarning(
                f"train_run: run {run.display} has no checkpoint to resume from (it stopped "
                f"before writing its first one): training it from the start"
                + (f"; the {redo} epoch(s) in its idps.csv are trained again" if redo else "")),
                stacklevel=2)
            resume = None
        else:
            _check_resumable(run, resume, target)
    if encoding is not None:
        encoding.state()  # a value JSON cannot store fails before anything is written
    writes = distributed is None or distributed.is_root  # (MPI: rank 0 writes the run folder)
    if overwrite and writes:
        run.clear()
    if resume is not None and (run.path / "encoding.json").is_file():
        saved = run.encoding()
        if encoding is not None and encoding.state() != saved.state():
            raise ValueError(f"train_run: the data's encoding (columns, scaling, categories) "
                             f"differs from run {run.display}'s encoding.json: the table "
                             "changed since the run started; train a new run")
        encoding = saved
    if writes:
        run.remove_stale_temp_files()  # left by a process killed mid-write; this one writes anew
        run = Run.create(config, root, name=name, metadata=metadata)
        if encoding is not None:
            encoding.save(run.path / "encoding.json")
    if distributed is not None:
        distributed.barrier()  # the other ranks read the run folder once rank 0 has set it up
    trainer = run.build_trainer(distributed=distributed)
    start = run.resume(trainer, resume) if resume is not None else 0
    n = target - start
    from nnjit.data.graph import Graph

    graph = X if isinstance(X, Graph) else None  # full batch, its masks (y and X_val unused)
    val = (X_val, y_val) if X_val is not None else None
    has_val = val is not None or (graph is not None and graph.val_mask is not None)
    monitor = tc.monitor or ("val_loss" if has_val else "train_loss")
    extra = []
    kwargs = {}
    mode_ok = tc.mode == "auto" or tc.mode == ("max" if monitor == "val_accuracy" else "min")
    if tc.patience is None:
        kwargs["n_iter_no_change"] = None
    elif monitor in MONITORS and mode_ok:
        kwargs.update(n_iter_no_change=tc.patience, tol=tc.min_delta, monitor=monitor)
    else:
        kwargs["n_iter_no_change"] = None
        extra.append(EarlyStopping(monitor, tc.mode, tc.patience, tc.min_delta,
                                   restore_best_weights=tc.restore_best))
    if monitor in MONITORS and (has_val or not monitor.startswith("val_")):
        kwargs.setdefault("monitor", monitor)
    scheduler = config.scheduler.build() if config.scheduler is not None else None
    loader = graph if graph is not None else DataLoader(
        X, y, batch_size=config.rows_per_batch(_n_rows(X)), shuffle=tc.shuffle)
    # Callbacks with a state (EarlyStopping, ...) see each epoch before the run writes its
    # checkpoints, so LAST holds their state after that epoch; the others run after the run's.
    callbacks = list(callbacks)
    stateful = [c for c in callbacks if _has_state(c)]
    writer = (RunCallback(run, start_epoch=start, monitor=tc.monitor, per_batch=log_batches,
                          encoding=encoding) if writes else None)
    trainer.fit(loader, epochs=start + n, initial_epoch=start, schedule_epochs=tc.epochs,
                val=val, restore_best=tc.restore_best, verbose=verbose,
                callbacks=[*extra, *stateful, *([writer] if writer else []),
                           *(c for c in callbacks if not _has_state(c))],
                scheduler=scheduler, grad_clip_norm=config.optimizer.grad_clip_norm,
                accumulation_steps=config.optimizer.accumulation_steps,
                log_batches=log_batches, **kwargs)
    if distributed is not None:
        distributed.barrier()  # rank 0 has written the last epoch's row and checkpoints
    return run, trainer, run.history()


def _check_resumable(run: Run, phase: Checkpoints, target: int) -> None:
    """NoCheckpointError without that checkpoint; RunFinishedError when it is at or past
    ``target`` or early stopping ended the run there."""
    from nnjit.train.checkpoint import metadata_epoch, unpack_callbacks, unpack_fit
    from nnjit.io.nne import load_nne

    path = run.path / "checkpoints" / phase.filename
    if not path.is_file():
        raise NoCheckpointError(run, phase)
    nne = load_nne(path)
    epoch = metadata_epoch(nne)
    fit = unpack_fit(nne)
    # only EarlyStopping's states are validated on load (a user callback's state is its own)
    stopped = (fit is not None and fit["stopped"] == 1.0) or any(
        int(state.get("stopped_epoch", 0) or 0) > 0
        for key, state in unpack_callbacks(nne).items() if key.startswith("EarlyStopping"))
    if stopped or epoch >= target:
        raise RunFinishedError(run, epoch, target, stopped)


def _epochs(value) -> int:
    return Int(min=1).check("train_run: epochs", value)


def _has_state(callback) -> bool:
    return isinstance(callback, Callback) and type(callback).state is not Callback.state


def _n_rows(X) -> int:
    """The rows of ``X`` (an array, or a tuple of arrays: one per model input)."""
    from nnjit.data.inputs import is_multi

    return len(X[0] if is_multi(X) else X)
