"""A run's folder under a runs root (default ``./runs``): its id, its files, reading them.

::

    runs/<id>/run.yaml           the RunConfig (its config_hash() is the id)
    runs/<id>/metadata.yaml      nnjit/numba/numpy/Python versions, platform, CPU, git commit
    runs/<id>/idps.csv           one row per epoch: epoch, lr, train/val loss and metrics, seconds
    runs/<id>/encoding.json      a CSV run's TabularEncoding (column order, scaling, categories)
    runs/<id>/checkpoints/{first,q1,q2,q3,last,best}.nne

Training writes them (:func:`~nnjit.experiment.train_run.train_run` with its
:class:`~nnjit.experiment.run_callback.RunCallback`); :class:`Run` creates the folder, finds runs
and reads what is there. Each checkpoint records its 1-based ``epoch``, the run's config
(``run_config``) and, for a CSV run, its encoding (``encoding``) in its metadata, so a
checkpoint file alone rebuilds the model and encodes new rows (``nnjit predict``).

Example:
    >>> run, trainer, history = train_run(config, X, y, X_val, y_val, root="runs")
    >>> Run.load(run.id).history()
    >>> model = run.build_model(); run.load_weights(model, Checkpoints.BEST)
"""

from __future__ import annotations

import os
import platform
import re
import subprocess
import warnings
from pathlib import Path

import numpy as np
import yaml

from nnjit.experiment.config import RunConfig
from nnjit.experiment.enums import Checkpoints
from nnjit.experiment.excerpt import excerpt
from nnjit.experiment.run_errors import RunFileError
from nnjit.experiment.run_history import read_batch_history, read_history
from nnjit.experiment.safe_yaml import (
    MAX_YAML_BYTES,
    ConfigLoader,
    PlainLoader,
    describe_yaml_error,
    read_yaml_file,
)
from nnjit.io.atomic import atomic_write_text, remove_stale_temp_files

__all__ = ["Run", "check_run_id"]

_HASH_ID = re.compile(r"[0-9a-f]{12}")
_NAME_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")

#: What training writes in a run folder besides run.yaml and metadata.yaml: ``overwrite=True``
#: removes exactly these (a user's own files in the folder stay).
RUN_OUTPUTS = ("idps.csv", "report.html", "encoding.json")


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
    if path.is_symlink():  # (inside the root: still another run's file, or a swapped one)
        raise RunFileError(f"{shown}/{name} is a symbolic link: nnjit does not follow links "
                           f"inside a run folder; replace it with the real file", path, shown)
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


def _refuse_links(folder: Path, shown: str) -> None:
    """RunFileError when what training reads, writes or deletes in a run folder (its
    ``checkpoints/`` folder and ``*.nne`` files, :data:`RUN_OUTPUTS`) is a symbolic link: nnjit would
    follow it out of the run (``--overwrite`` deleted the ``*.nne`` files a linked
    ``checkpoints/`` pointed at, and wrote the new ones there)."""
    checkpoints = folder / "checkpoints"
    entries = [folder / name for name in RUN_OUTPUTS] + [checkpoints]
    if checkpoints.is_dir() and not checkpoints.is_symlink():
        entries += sorted(p for p in checkpoints.iterdir() if p.suffix == ".nne")
    for path in entries:
        if path.is_symlink():
            inner = path.relative_to(folder).as_posix()
            raise RunFileError(f"{shown}/{inner} is a symbolic link: nnjit does not follow "
                               f"links inside a run folder; replace it with the real "
                               f"{'folder' if path == checkpoints else 'file'}", path, shown)


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
        _refuse_links(run.path, run.display)
        (run.path / "checkpoints").mkdir(parents=True, exist_ok=True)
        if not yaml_path.exists():
            atomic_write_text(yaml_path, config.to_yaml(full=True))
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
        _refuse_links(self.path, self.display)
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
        _refuse_links(path, shown)
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
        return read_history(self.path / "idps.csv")

    def batch_history(self):
        """The per-batch rows of ``idps.csv`` (empty when the run did not log batches)."""
        return read_batch_history(self.path / "idps.csv")

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
        """The run's :class:`~nnjit.data.tabular_encoding.TabularEncoding` (``encoding.json``), or None
        when it was not trained on a table."""
        from nnjit.data.tabular_encoding import TabularEncoding

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
        """A :class:`~nnjit.experiment.run_callback.RunCallback` writing this run."""
        from nnjit.experiment.run_callback import RunCallback

        return RunCallback(self, start_epoch=start_epoch, monitor=monitor)

