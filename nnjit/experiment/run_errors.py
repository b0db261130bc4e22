"""What can go wrong with a run: the errors (and the warning) of opening, creating, training
and resuming a run folder.

They take the :class:`~nnjit.experiment.run_folder.Run` as a plain argument (this module does not
import it: the run folder imports these errors).
"""

from __future__ import annotations

from pathlib import Path

from nnjit.experiment.enums import Checkpoints

__all__ = ["NoCheckpointError", "ResumeFromStartWarning", "RunError", "RunExistsError",
           "RunFileError", "RunFinishedError"]


class RunError(Exception):
    """A run cannot be trained as asked. ``run`` is the
    :class:`~nnjit.experiment.run_folder.Run`."""

    def __init__(self, message: str, run):
        super().__init__(message)
        self.run = run


class RunExistsError(RunError):
    """``train_run`` without ``resume`` on a run that already trained ``epochs_done`` epochs:
    pass ``resume=`` to continue it or ``overwrite=True`` to start it again."""

    def __init__(self, run, epochs_done: int):
        super().__init__(f"train_run: run {run.display} already exists ({epochs_done} of "
                         f"{run.config.train.epochs} epochs done): pass resume=Checkpoints.LAST "
                         "(or BEST) to continue it, or overwrite=True to delete its history "
                         "and checkpoints and train it again", run)
        self.epochs_done = epochs_done


class RunFinishedError(RunError, ValueError):
    """Nothing to train: the resumed checkpoint is at ``epoch`` and the fit should stop at
    ``target`` <= ``epoch``, or early stopping ended the run (``stopped_early``)."""

    def __init__(self, run, epoch: int, target: int, stopped_early: bool):
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

    def __init__(self, run, phase: Checkpoints):
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

    def __init__(self, message: str, path: Path, folder: str, run=None):
        super().__init__(message, run)
        self.path, self.folder = path, folder

