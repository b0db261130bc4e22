"""Runs: a folder per experiment under a runs root (default ``./runs``).

::

    runs/<id>/run.yaml           the RunConfig (its config_hash() is the id)
    runs/<id>/metadata.yaml      nnjit/numba/numpy/Python versions, platform, CPU, git commit
    runs/<id>/idps.csv           one row per epoch: epoch, lr, train/val loss and metrics, seconds
    runs/<id>/encoding.json      a CSV run's TabularEncoding (column order, scaling, categories)
    runs/<id>/checkpoints/{first,q1,q2,q3,last,best}.nne

Every file is rewritten after every epoch atomically (temporary file, fsync, ``os.replace``), in
the order ``idps.csv``, the other checkpoints, ``last.nne``, so a process killed at any moment
leaves a loadable run whose ``last.nne`` is at most one epoch behind ``idps.csv`` and the other
checkpoints (resuming drops the extra row and writes that epoch's files again).
``last.nne`` holds the most recent epoch (so it is the warm-resume point after a crash), the
quarter phases are saved at :meth:`Checkpoints.epoch` of the configured epoch count, ``best.nne``
when the monitored metric improves. Each checkpoint records its 1-based ``epoch``, the run's
config (``run_config``) and, for a CSV run, its encoding (``encoding``) in its metadata, so a
checkpoint file alone rebuilds the model and encodes new rows (``nnjit predict``).

A run that has trained is never restarted silently: :func:`train_run` on it raises
:class:`RunExistsError` unless given ``resume=`` (continue from a checkpoint) or
``overwrite=True`` (delete its history, report and checkpoints, then train from scratch).

Example:
    >>> run, trainer, history = train_run(config, X, y, X_val, y_val, root="runs")
    >>> Run.load(run.id).history()
    >>> model = run.build_model(); run.load_weights(model, Checkpoints.BEST)
"""

from __future__ import annotations

import csv
import io
import math
import os
import platform
import re
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import yaml

from nnjit.checks import Int
from nnjit.experiment.config import RunConfig
from nnjit.experiment.enums import Checkpoints
from nnjit.experiment.excerpt import excerpt
from nnjit.experiment.safe_yaml import (
    MAX_YAML_BYTES,
    ConfigLoader,
    PlainLoader,
    describe_yaml_error,
    read_yaml_file,
)
from nnjit.io.atomic import atomic_write_text, remove_stale_temp_files
from nnjit.train.builtin_callbacks import (
    EarlyStopping,
    _Tracker,
    _usable_logs,
)
from nnjit.train.callbacks import Callback

__all__ = ["IDPS_BATCH_COLUMNS", "IDPS_COLUMNS", "NoCheckpointError", "ResumeFromStartWarning",
           "Run", "RunCallback", "RunError", "RunExistsError", "RunFileError", "RunFinishedError",
           "check_run_id", "train_run"]

IDPS_COLUMNS = ("epoch", "lr", "train_loss", "train_accuracy", "val_loss", "val_accuracy",
                "seconds")
#: ``idps.csv`` columns when per-batch rows are asked for: one row per training batch (its
#: ``batch`` number, validation fields empty) before each epoch's row (``batch`` empty).
IDPS_BATCH_COLUMNS = ("epoch", "batch") + IDPS_COLUMNS[1:]
_HASH_ID = re.compile(r"[0-9a-f]{12}")
_NAME_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


#: What training writes in a run folder besides run.yaml and metadata.yaml: ``overwrite=True``
#: removes exactly these (a user's own files in the folder stay).
RUN_OUTPUTS = ("idps.csv", "report.html", "encoding.json")


class RunError(Exception):
    """A run cannot be trained as asked. ``run`` is the :class:`Run`."""

    def __init__(self, message: str, run: Run):
        super().__init__(message)
        self.run = run


class RunExistsError(RunError):
    """``train_run`` without ``resume`` on a run that already trained ``epochs_done`` epochs:
    pass ``resume=`` to continue it or ``overwrite=True`` to start it again."""

    def __init__(self, run: Run, epochs_done: int):
        super().__init__(f"train_run: run {run.display} already exists ({epochs_done} of "
                         f"{run.config.train.epochs} epochs done): pass resume=Checkpoints.LAST "
                         "(or BEST) to continue it, or overwrite=True to delete its history "
                         "and checkpoints and train it again", run)
        self.epochs_done = epochs_done


class RunFinishedError(RunError, ValueError):
    """Nothing to train: the resumed checkpoint is at ``epoch`` and the fit should stop at
    ``target`` <= ``epoch``, or early stopping ended the run (``stopped_early``)."""

    def __init__(self, run: Run, epoch: int, target: int, stopped_early: bool):
        total = run.config.train.epochs
        if stopped_early:
            why = (f"early stopping ended it at epoch {epoch} of {total}; a new config (e.g. "
                   "a larger train.patience) makes a new run")
        else:
            why = (f"it is at epoch {epoch} of {target}; pass epochs=M with M > {epoch} to "
                   "train on")
        super().__init__(f"train_run: nothing to train: run {run.display} is finished: {why}",
                         run)
        self.epoch, self.target, self.stopped_early = epoch, target, stopped_early


class NoCheckpointError(RunError, FileNotFoundError):
    """``resume=`` names a checkpoint the run has not written (yet)."""

    def __init__(self, run: Run, phase: Checkpoints):
        self.phase = phase
        saved = run.saved_phases()
        if not (run.path / "run.yaml").is_file():
            state = "does not exist yet"
        elif not saved:
            state = "has no checkpoint yet (no epoch finished)"
        else:
            state = f"has no {phase.value} checkpoint (saved: {', '.join(saved)})"
        super().__init__(f"train_run: cannot resume: run {run.display} {state}; train it "
                         "without resume", run)


class ResumeFromStartWarning(UserWarning):
    """``train_run(resume=...)`` on a run that stopped (was killed) before it wrote its first
    checkpoint: there is nothing to continue from, so it trains from the start (the same seed
    gives the same epochs again)."""


class RunFileError(RunError, ValueError):
    """A run cannot be opened: its ``run.yaml`` or ``metadata.yaml`` cannot be read or is
    invalid, or its folder or one of those files is a symlink to outside the runs root (nnjit
    never follows one). The message names the file; ``path`` is it, ``folder`` the run's
    folder as printed (``runs/<id>``); ``run`` is None when no :class:`Run` could be made."""

    def __init__(self, message: str, path: Path, folder: str, run: Run | None = None):
        super().__init__(message, run)
        self.path, self.folder = path, folder


#: Run ids a "no such run" message lists at most.
_MAX_LISTED_RUNS = 10


def check_run_id(run_id) -> str:
    """``run_id`` if it is a config hash (12 hex digits) or a safe name (letters, digits,
    ``.``, ``_``, ``-``; no leading dot, at most 64 characters, no ``..``); else ValueError."""
    if not isinstance(run_id, str) or not (
            _HASH_ID.fullmatch(run_id) or (_NAME_ID.fullmatch(run_id) and ".." not in run_id)):
        raise ValueError(f"invalid run id {run_id!r}: expected 12 hex digits (a config hash) or "
                         "a name of letters, digits, '.', '_', '-' (no path separators, no '..')")
    return run_id


def _run_dir(root: Path, run_id: str) -> Path:
    """The run's folder, resolved; RunFileError when it is a symlink to outside the root."""
    check_run_id(run_id)
    base = root.resolve()
    path = (base / run_id).resolve()
    if path.parent != base:
        folder = f"{_display_root(root)}/{run_id}"
        raise RunFileError(f"run folder {folder} is a symlink to outside the runs root "
                           f"{_display_root(root)} (nnjit does not follow it)", root / run_id,
                           folder)
    return path


def _read_run_yaml(root: Path, folder: Path, name: str, shown: str, loader=PlainLoader):
    """The data of the YAML file ``folder/name`` of a run (``shown``: the folder as printed),
    read by :func:`~nnjit.experiment.safe_yaml.read_yaml_file`; RunFileError naming it when it
    is a symlink to outside ``root``, unreadable or invalid."""
    path = folder / name
    if not path.resolve().is_relative_to(root.resolve()):
        raise RunFileError(f"{shown}/{name} is a symlink to outside the runs root "
                           f"{_display_root(root)} (nnjit does not follow it)", path, shown)
    try:
        return read_yaml_file(path, loader)
    except yaml.YAMLError as e:
        raise RunFileError(f"invalid {shown}/{name}: {describe_yaml_error(e)}", path,
                           shown) from e
    except OSError as e:
        raise RunFileError(f"cannot read {shown}/{name}: {e.strerror or e}", path, shown) from e


def _read_run_config(root: Path, folder: Path, shown: str) -> RunConfig:
    """The RunConfig in ``folder/run.yaml``; RunFileError naming the file otherwise."""
    data = _read_run_yaml(root, folder, "run.yaml", shown, ConfigLoader)
    try:
        return RunConfig.from_state({} if data is None else data)
    except (ValueError, TypeError) as e:
        raise RunFileError(f"invalid {shown}/run.yaml: {e}", folder / "run.yaml", shown) from e


def _has_run_yaml(folder: Path) -> bool:
    """``folder/run.yaml`` is a file, or a symlink (checked when read)."""
    path = folder / "run.yaml"
    return path.is_symlink() or path.is_file()


def _display_root(root) -> str:
    """How the root is printed: as given when relative, else just its folder name."""
    text = os.fspath(root)
    return text if not os.path.isabs(text) else Path(text).name


def _git_commit(cwd) -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True,
                             text=True, timeout=5, check=False)
    except (OSError, subprocess.SubprocessError, ValueError):
        return None
    commit = out.stdout.strip()
    return commit if out.returncode == 0 and re.fullmatch(r"[0-9a-f]{40,64}", commit) else None


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def collect_metadata() -> dict:
    """Versions, platform, CPU and (when in a git repository) the commit; never fails."""
    import numba

    from nnjit._version import __version__

    meta = {
        "nnjit": __version__,
        "numba": numba.__version__,
        "numpy": np.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu": _cpu_name(),
        "cpu_count": os.cpu_count(),
    }
    commit = _git_commit(Path(__file__).resolve().parents[1])  # the nnjit package folder
    if commit is None:
        commit = _git_commit(os.getcwd())
    meta["git_commit"] = commit
    return meta


def _fmt(value) -> str:
    if value is None:
        return ""
    value = float(value)
    if math.isnan(value):
        return ""
    if value.is_integer() and abs(value) < 2 ** 53:
        return str(int(value))
    return repr(value)


class Run:
    """A run folder. Create with :meth:`create`, open with :meth:`load`, list with :meth:`all`.

    Attributes:
        id: the run id; root: the runs root; path: the folder; config: the :class:`RunConfig`.
    """

    def __init__(self, root, run_id: str, config: RunConfig):
        self.root = Path(os.fspath(root))
        self.id = check_run_id(run_id)
        self.path = _run_dir(self.root, run_id)
        self.config = config
        self._root_text = _display_root(root)

    # -- creating and finding --------------------------------------------------------------------
    @classmethod
    def create(cls, config: RunConfig, root="runs", name: str | None = None,
               metadata: dict | None = None) -> Run:
        """The run of ``config`` under ``root``: ``root/<config.config_hash()>`` (or ``name``).

        Creates the folder and writes ``run.yaml`` and ``metadata.yaml`` (with the extra
        ``metadata`` entries, e.g. ``nnjit train``'s ``data`` and ``data_target``). An existing
        folder with the same config is reused (to resume it); a different config there is an
        error.
        """
        if not isinstance(config, RunConfig):
            raise TypeError(f"Run.create: config must be a RunConfig, got "
                            f"{type(config).__name__}")
        run = cls(root, config.config_hash() if name is None else name, config)
        run._check_config()
        meta_text = yaml.safe_dump({**collect_metadata(), **(metadata or {})}, sort_keys=False)
        if len(meta_text.encode("utf-8")) > MAX_YAML_BYTES:  # it could not be read back
            raise ValueError(f"Run.create: metadata takes {len(meta_text.encode('utf-8'))} "
                             f"bytes as YAML, more than the {MAX_YAML_BYTES} nnjit reads back")
        yaml_path = run.path / "run.yaml"
        (run.path / "checkpoints").mkdir(parents=True, exist_ok=True)
        if not yaml_path.exists():
            atomic_write_text(yaml_path, config.to_yaml())
        atomic_write_text(run.path / "metadata.yaml", meta_text)
        return run

    def _check_config(self) -> None:
        """ValueError when the folder already holds a run of another config."""
        if _has_run_yaml(self.path):
            existing = _read_run_config(self.root, self.path, self.display)
            if existing != self.config:
                raise ValueError(f"run {self.display} already exists with another config")

    def epochs_done(self) -> int:
        """Epochs the run has trained: ``last.nne``'s epoch, else the rows of ``idps.csv``
        (0 for a new run)."""
        try:
            return self.checkpoint_epoch(Checkpoints.LAST)
        except FileNotFoundError:
            return len(self.history())

    def saved_phases(self) -> list[str]:
        """Names of the checkpoints saved so far (``["best", "first", "last", ...]``)."""
        return [p.stem for p in sorted((self.path / "checkpoints").glob("*.nne"))]

    def clear(self) -> None:
        """Delete what training wrote (:data:`RUN_OUTPUTS` and the checkpoints); ``run.yaml``,
        ``metadata.yaml`` and any other file stay."""
        for name in RUN_OUTPUTS:
            (self.path / name).unlink(missing_ok=True)
        folder = self.path / "checkpoints"
        if folder.is_dir():
            for path in folder.iterdir():
                if path.is_file() and path.suffix == ".nne":
                    path.unlink()
        self.remove_stale_temp_files()

    def remove_stale_temp_files(self) -> list[Path]:
        """Delete the temporary files a process killed while writing this run left behind
        (:func:`nnjit.io.atomic.remove_stale_temp_files`: exactly the temporary names of
        ``run.yaml``, ``metadata.yaml``, :data:`RUN_OUTPUTS` and the checkpoints, nothing
        else); returns their paths. :func:`train_run` calls it when the run starts again."""
        removed = remove_stale_temp_files(self.path, ("run.yaml", "metadata.yaml", *RUN_OUTPUTS))
        return removed + remove_stale_temp_files(self.path / "checkpoints",
                                                 [phase.filename for phase in Checkpoints])

    @classmethod
    def load(cls, run_id: str, root="runs") -> Run:
        """Open an existing run.

        Raises:
            FileNotFoundError: no such run (the message names it relative to the root and lists
                up to 10 runs there).
            RunFileError: its ``run.yaml`` is unreadable or invalid, or it or the run's folder
                is a symlink to outside the root.
            ValueError: an invalid run id.
        """
        root_path = Path(os.fspath(root))
        path = _run_dir(root_path, run_id)
        shown = f"{_display_root(root)}/{run_id}"
        if not _has_run_yaml(path):
            known = [r.id for r in cls.scan(root)[0]] if root_path.is_dir() else []
            listed = ", ".join(known[:_MAX_LISTED_RUNS]) + (
                f" and {len(known) - _MAX_LISTED_RUNS} more" if len(known) > _MAX_LISTED_RUNS
                else "")
            raise FileNotFoundError(f"no run {run_id!r} in {_display_root(root)}"
                                    f"{'; runs: ' + listed if known else ''}")
        return cls(root, run_id, _read_run_config(root_path, path, shown))

    @classmethod
    def all(cls, root="runs") -> list[Run]:
        """Every run under ``root`` (folders with a ``run.yaml``) that can be opened, sorted by
        id. Each one that cannot (:class:`RunFileError`: an invalid ``run.yaml``, a symlink
        out of the root...) is left out with a ``UserWarning`` naming it."""
        runs, skipped = cls.scan(root)
        for error in skipped:
            warnings.warn(f"Run.all: skipped {error.folder}: {error}", stacklevel=2)
        return runs

    @classmethod
    def scan(cls, root="runs") -> tuple[list[Run], list[RunFileError]]:
        """``(runs, skipped)``: the runs under ``root`` that can be opened, sorted by id, and
        the :class:`RunFileError` of each folder with a ``run.yaml`` that cannot be. Folders
        whose name is not a run id, or without a ``run.yaml``, are not runs and not listed."""
        root_path = Path(os.fspath(root))
        if not root_path.is_dir():
            return [], []
        runs, skipped = [], []
        for child in sorted(root_path.iterdir()):
            try:
                check_run_id(child.name)
            except ValueError:
                continue
            shown = f"{_display_root(root)}/{child.name}"
            try:
                if _has_run_yaml(child):
                    runs.append(cls.load(child.name, root))
            except RunFileError as e:
                skipped.append(e)
            except OSError as e:  # e.g. a folder this user may not enter
                skipped.append(RunFileError(f"cannot read {shown}: {e.strerror or e}", child,
                                            shown))
        return runs, skipped

    # -- contents --------------------------------------------------------------------------------
    @property
    def display(self) -> str:
        """The run's folder relative to (and including) the runs root, for printing."""
        return f"{self._root_text}/{self.id}"

    def __repr__(self) -> str:
        return f"Run({self.id!r}, root={self._root_text!r})"

    def metadata(self) -> dict:
        """``metadata.yaml`` as a dict (empty when there is none); RunFileError naming it when
        it cannot be read, is invalid YAML, or is not a mapping."""
        path = self.path / "metadata.yaml"
        if not (path.is_symlink() or path.exists()):
            return {}
        data = _read_run_yaml(self.root, self.path, "metadata.yaml", self.display)
        if data is None:
            return {}
        if not isinstance(data, dict):
            raise RunFileError(f"invalid {self.display}/metadata.yaml: expected a mapping, got "
                               f"{type(data).__name__} {excerpt(data, 60)}", path, self.display,
                               self)
        return data

    def history(self):
        """``idps.csv`` as a DataFrame (empty, with the columns, before the first epoch)."""
        import pandas as pd

        path = self.path / "idps.csv"
        if not path.exists() or path.stat().st_size == 0:
            return pd.DataFrame({c: pd.Series(dtype="float64") for c in IDPS_COLUMNS})
        frame = pd.read_csv(path)
        if "batch" in frame.columns:  # a per-batch log: keep the epoch rows
            frame = frame[frame["batch"].isna()].drop(columns="batch").reset_index(drop=True)
        return frame

    def batch_history(self):
        """The per-batch rows of ``idps.csv`` (empty when the run did not log batches)."""
        import pandas as pd

        path = self.path / "idps.csv"
        frame = pd.read_csv(path) if path.exists() and path.stat().st_size else pd.DataFrame()
        if "batch" not in frame.columns:
            return pd.DataFrame({c: pd.Series(dtype="float64") for c in IDPS_BATCH_COLUMNS})
        rows = frame[frame["batch"].notna()].reset_index(drop=True)
        rows[["epoch", "batch"]] = rows[["epoch", "batch"]].astype("int64")
        return rows

    def _rows(self) -> list[list[str]]:
        path = self.path / "idps.csv"
        if not path.exists():
            return []
        with open(path, encoding="utf-8", newline="") as fh:
            rows = list(csv.reader(fh))
        return rows[1:]

    def checkpoint(self, phase=Checkpoints.LAST) -> Path:
        """Path of a phase's checkpoint (``Checkpoints`` member or name); FileNotFoundError if
        that phase was not saved (yet)."""
        phase = Checkpoints.get(phase)
        path = self.path / "checkpoints" / phase.filename
        if not path.is_file():
            saved = [p.stem for p in sorted((self.path / "checkpoints").glob("*.nne"))]
            raise FileNotFoundError(f"run {self.display} has no {phase.value} checkpoint; saved: "
                                    f"{', '.join(saved) or 'none'}")
        return path

    def checkpoint_epoch(self, phase=Checkpoints.LAST) -> int:
        """The 1-based epoch a checkpoint was saved after."""
        from nnjit.train.checkpoint import metadata_epoch
        from nnjit.io.nne import load_nne

        return metadata_epoch(load_nne(self.checkpoint(phase)))

    def encoding(self):
        """The run's :class:`~nnjit.data.tabular.TabularEncoding` (``encoding.json``), or None
        when it was not trained on a table."""
        from nnjit.data.tabular import TabularEncoding

        path = self.path / "encoding.json"
        return TabularEncoding.load(path) if path.is_file() else None

    def build_model(self):
        """A fresh (untrained) model from ``run.yaml`` (via :class:`Nets`)."""
        return self.config.model.build()

    def load_weights(self, model, phase=Checkpoints.BEST):
        """Load a checkpoint's weights into ``model``; returns the model."""
        from nnjit.io.weights import load_module

        load_module(model, self.checkpoint(phase))
        return model

    def build_trainer(self, seed: int | None = None, distributed=None):
        """A fresh model and Trainer as ``run.yaml`` describes them (seeded like the run);
        ``distributed``: :class:`nnjit.MPI` for a data-parallel fit."""
        from nnjit.random import set_seed
        from nnjit.train.trainer import Trainer

        cfg = self.config
        seed = cfg.train.seed if seed is None else seed
        set_seed(seed)
        model = self.build_model()
        return Trainer(model, cfg.optimizer.build(), cfg.model.build_loss(),
                       dtype=cfg.model.numpy_dtype, seed=seed, distributed=distributed)

    def checkpoint_outputs(self, X, phase=Checkpoints.BEST) -> np.ndarray:
        """The network outputs (logits for classification) of a checkpoint's weights on ``X``,
        ``(len(X), out_dim)``: a model built from ``run.yaml`` with the checkpoint loaded."""
        trainer = self.build_trainer()
        from nnjit.data.full_batch import FullBatch

        trainer.load_checkpoint(self.checkpoint(phase))
        if isinstance(X, FullBatch):  # a graph: every node's outputs, then the mask's rows
            return trainer.predict_outputs(X.graph)[X.mask]
        return trainer.predict_outputs(np.asarray(X).reshape(len(X), -1))

    def load_data(self, target: str | None = None):
        """The run's data (:func:`nnjit.experiment.data.load_run_data`) from ``run.yaml``'s
        ``data`` (and ``metadata.yaml``'s ``data_target``); None when the run has no ``data``
        (it was trained on arrays passed in code)."""
        from nnjit.experiment.data import load_run_data

        spec = self.config.data
        if not spec:
            return None
        meta = self.metadata()
        regression = not self.config.model.loss.builder().is_classification
        return load_run_data(spec, regression, self.config.train.seed,
                             target or meta.get("data_target"))

    def resume(self, trainer, phase=Checkpoints.LAST) -> int:
        """Load a checkpoint (weights, optimizer, RNG and shuffle state) into ``trainer``;
        returns the number of epochs that checkpoint had completed."""
        epoch = self.checkpoint_epoch(phase)
        trainer.load_checkpoint(self.checkpoint(phase))
        return epoch

    def callback(self, start_epoch: int = 0, monitor: str | None = None) -> RunCallback:
        return RunCallback(self, start_epoch=start_epoch, monitor=monitor)


class RunCallback(Callback):
    """Write ``idps.csv`` and the checkpoints of ``run`` after every epoch, atomically.

    Args:
        run: the :class:`Run`.
        start_epoch: epochs already done (when resuming); rows after it are dropped.
        encoding: the run's TabularEncoding, stored in every checkpoint's metadata.
        monitor: metric for ``best.nne`` (default: ``run.config.train.monitor``, else
            ``val_loss`` when there is validation data, else ``train_loss``); its mode is
            ``run.config.train.mode``.
    """

    def __init__(self, run: Run, start_epoch: int = 0, monitor: str | None = None,
                 per_batch: bool = False, encoding=None):
        from nnjit.train.checkpoint import ENCODING, RUN_CONFIG

        self.run = run
        self._metadata = {RUN_CONFIG: run.config.state()}
        if encoding is not None:
            self._metadata[ENCODING] = encoding.state()
        self.per_batch = bool(per_batch)
        self.start_epoch = int(start_epoch)
        self.monitor = monitor or run.config.train.monitor
        self.phases = set(run.config.train.checkpoints)
        self.n_epochs = run.config.train.epochs
        self._tracker = None
        self._rows = [r for r in run._rows() if r and int(float(r[0])) <= self.start_epoch]

    def on_train_begin(self, trainer, logs=None):
        initial = int((logs or {}).get("initial_epoch", 0))
        if initial != self.start_epoch:
            raise ValueError(f"RunCallback(start_epoch={self.start_epoch}) needs "
                             f"fit(..., initial_epoch={self.start_epoch}), got initial_epoch="
                             f"{initial}")
        self._tracker = None
        if Checkpoints.BEST in self.phases and self.start_epoch > 0:
            self._seed_best()

    def _seed_best(self):
        """Continue BEST from the rows already written (a resumed run)."""
        monitor = self.monitor or "val_loss"
        hist = self.run.history()
        hist = hist[hist["epoch"] <= self.start_epoch]
        if monitor not in hist or hist[monitor].isna().all():
            monitor = self.monitor or "train_loss"
        if monitor in hist:
            self._tracker = _Tracker(monitor, self.run.config.train.mode, 0.0, "RunCallback")
            for v in hist[monitor].dropna():
                self._tracker.improved(float(v))

    def on_epoch_end(self, trainer, epoch, logs):
        global_epoch = int(epoch)  # absolute: the fit runs with initial_epoch=start_epoch
        row = [str(global_epoch)] + [_fmt(logs.get(c)) for c in IDPS_COLUMNS[1:]]
        if self.per_batch:
            batches = trainer.batch_history_
            if batches is None:
                raise ValueError("RunCallback(per_batch=True) needs fit(..., log_batches=True)")
            for b in batches[batches["epoch"] == int(epoch)].itertuples():
                self._rows.append([str(global_epoch), str(b.batch), _fmt(b.lr),
                                   _fmt(b.train_loss), _fmt(b.train_accuracy), "", "", ""])
            row.insert(1, "")
        self._rows.append(row)
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(IDPS_BATCH_COLUMNS if self.per_batch else IDPS_COLUMNS)
        writer.writerows(self._rows)
        atomic_write_text(self.run.path / "idps.csv", out.getvalue())

        due = {c for c in Checkpoints.due(global_epoch - 1, self.n_epochs)
               if c is not Checkpoints.LAST} if global_epoch <= self.n_epochs else set()
        due.add(Checkpoints.LAST)
        if Checkpoints.BEST in self.phases:
            if self._tracker is None:
                usable = _usable_logs(logs, trainer)
                monitor = self.monitor or ("val_loss" if "val_loss" in usable else "train_loss")
                self._tracker = _Tracker(monitor, self.run.config.train.mode, 0.0, "RunCallback")
            value = logs.get(self._tracker.monitor)
            if value is not None and not math.isnan(float(value)) \
                    and self._tracker.improved(float(value)):
                due.add(Checkpoints.BEST)
        # LAST (the resume point) goes last: a kill after it finds every other file of this
        # epoch written, so a resume never skips a BEST (or quarter) save of an epoch it keeps.
        for phase in sorted(Checkpoints, key=lambda c: c is Checkpoints.LAST):
            if phase in due and phase in self.phases:
                self._save(trainer, phase, global_epoch)

    def _save(self, trainer, phase: Checkpoints, epoch: int) -> None:
        trainer.save_checkpoint(self.run.path / "checkpoints" / phase.filename,
                                metadata={"epoch": epoch, "phase": phase.value,
                                          "run": self.run.id, **self._metadata})


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
        encoding: the :class:`~nnjit.data.tabular.TabularEncoding` that made ``X`` from a
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
    loader = graph if graph is not None else DataLoader(X, y, batch_size=tc.batch_size,
                                                         shuffle=tc.shuffle)
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


#: At most this many rows go into the report's t-SNE (a random subset, seed 0), embedded with
#: 500 iterations on one thread: about 1 s with scikit-learn on a busy 2-core machine (500 rows
#: and 1000 iterations took 3.4 s), and the picture does not need more.
REPORT_TSNE_ROWS = 300
REPORT_TSNE_ITERATIONS = 500


def write_report(run: Run, path=None, *, data=None, class_names=None) -> Path:
    """Write one self-contained HTML page for ``run``; returns its path (default
    ``<run folder>/report.html``).

    The page holds the config, the metadata, the loss / accuracy / lr plots and the history
    table, and for classification runs whose data can be loaded the best checkpoint's
    confusion matrix, classification report and a 2-D t-SNE of its logits (at most
    :data:`REPORT_TSNE_ROWS` rows) on the evaluation data. plotly.js is inlined once.
    Without scikit-learn (the ``viz`` extra) the t-SNE is left out with a note in the page
    and one line on stderr.

    Args:
        data: ``(X, y)`` to evaluate on; default: the run's own data (:meth:`Run.load_data`:
            a built-in name or a CSV path from ``run.yaml``), its test part or else its
            validation part. Without either, the page says why those figures are missing.
        class_names: display names of the classes (default: the data set's, if known).
    """
    import html

    from nnjit.viz.figures import history_plot

    hist = run.history()
    figures = []  # (section, html) pairs; the first figure carries plotly.js
    if len(hist):
        groups = [("loss", ["train_loss", "val_loss"]),
                  ("accuracy", ["train_accuracy", "val_accuracy"]), ("learning rate", ["lr"])]
        if not run.config.model.loss.builder().is_classification:
            groups = [g for g in groups if g[0] != "accuracy"]
        for title, cols in groups:
            cols = [c for c in cols if c in hist and hist[c].notna().any()]
            if cols:
                figures.append(("History", history_plot(hist, columns=cols, names=[run.id],
                                                        title=title)))
    evaluation, note = _evaluation_figures(run, data, class_names)
    figures += evaluation[0]
    parts, seen = [], set()
    for i, (section, fig) in enumerate(figures):
        if section not in seen:
            seen.add(section)
            parts.append(f"<h2>{html.escape(section)}</h2>")
        parts.append(fig.to_html(full_html=False, include_plotlyjs=i == 0,
                                 div_id=f"nnjit-fig-{i}"))
    tables = "".join(evaluation[1])
    meta = "".join(f"<tr><th>{html.escape(str(k))}</th><td>{html.escape(str(v))}</td></tr>"
                   for k, v in run.metadata().items())
    page = (
        "<!DOCTYPE html><html><head><meta charset='utf-8'>"
        f"<title>nnjit run {html.escape(run.id)}</title></head><body>"
        f"<h1>Run {html.escape(run.display)}</h1>"
        f"<h2>Config</h2><pre>{html.escape(run.config.to_yaml())}</pre>"
        f"<h2>Metadata</h2><table>{meta}</table>"
        f"{''.join(parts) or '<h2>History</h2><p>no epochs yet</p>'}"
        f"{tables}"
        f"{'<p class=note>' + html.escape(note) + '</p>' if note else ''}"
        f"<h2>History table</h2>{hist.to_html(index=False, na_rep='', classes='history')}"
        "</body></html>")
    out = run.path / "report.html" if path is None else Path(os.fspath(path))
    atomic_write_text(out, page)
    return out


def _evaluation_figures(run: Run, data, class_names):
    """((figures, tables), note): the best checkpoint's confusion matrix, classification
    report and t-SNE on the evaluation data, or a note saying why they are missing."""
    if not run.config.model.loss.builder().is_classification:
        return ([], []), "No confusion matrix or t-SNE: this is a regression run."
    where = "given data"
    if data is None:
        try:
            loaded = run.load_data()
        except (OSError, ValueError) as e:
            return ([], []), ("No confusion matrix or t-SNE: the run's data could not be "
                              f"loaded ({e}).")
        if loaded is None:
            return ([], []), ("No confusion matrix or t-SNE: the run has no 'data' in run.yaml "
                              "(pass data=(X, y) to write_report).")
        X, y, where = loaded.evaluation()
        class_names = class_names if class_names is not None else loaded.class_names
    else:
        X, y = data
    phase = Checkpoints.BEST
    try:
        run.checkpoint(phase)
    except FileNotFoundError:
        phase = Checkpoints.LAST
    try:
        logits = run.checkpoint_outputs(X, phase)
    except FileNotFoundError as e:
        return ([], []), f"No confusion matrix or t-SNE: {e}"
    from nnjit.viz.figures import confusion_matrix, tsne
    from nnjit.viz.metrics import classification_report

    y = np.asarray(y).reshape(len(y), -1)
    y_true = y[:, 0] if y.shape[1] == 1 else np.argmax(y, axis=1)
    y_true = y_true.astype(np.int64)
    pred = (np.argmax(logits, axis=1) if logits.shape[1] > 1
            else (logits[:, 0] > 0).astype(np.int64))
    k = max(int(y_true.max()), int(pred.max()), logits.shape[1] - 1) + 1
    names = list(class_names) if class_names is not None and len(class_names) == k else None
    epoch = run.checkpoint_epoch(phase)
    label = f"{phase.value} checkpoint (epoch {epoch}), {where} data, {len(y)} rows"
    figures = [(f"Confusion matrix: {label}",
                confusion_matrix(y_true, pred, labels=list(range(k)), target_names=names))]
    report = classification_report(y_true, pred, target_names=names,
                                   labels=list(range(k)))
    tables = [f"<h2>Classification report: {label}</h2>"
              + report.to_html(float_format=lambda v: f"{v:.3f}", classes="report")]
    rows = np.arange(len(y))
    if len(rows) > REPORT_TSNE_ROWS:
        rows = np.sort(np.random.default_rng(0).choice(len(y), REPORT_TSNE_ROWS, replace=False))
    note = ""
    if len(rows) >= 5:
        perplexity = float(min(30.0, (len(rows) - 1) / 3))
        try:
            figures.append((f"t-SNE of the logits: {label}",
                            tsne(logits[rows], y_true[rows], perplexity=perplexity, seed=0,
                                 class_names=names, max_iter=REPORT_TSNE_ITERATIONS,
                                 title=f"t-SNE of the {phase.value} checkpoint's logits "
                                       f"({len(rows)} rows)")))
        except ImportError as e:  # scikit-learn is an optional extra: the rest still renders
            note = f"No t-SNE of the logits: {e}"
            print(f"nnjit report: t-SNE skipped: {e}", file=sys.stderr)
    return (figures, tables), note
