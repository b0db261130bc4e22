"""The run callback: writes a run's ``idps.csv`` and checkpoints after every epoch of its fit.

Every file is rewritten after every epoch atomically (temporary file, fsync, ``os.replace``), in
the order ``idps.csv``, the other checkpoints, ``last.nne``, so a process killed at any moment
leaves a loadable run whose ``last.nne`` is at most one epoch behind ``idps.csv`` and the other
checkpoints (resuming drops the extra row and writes that epoch's files again).
``last.nne`` holds the most recent epoch (so it is the warm-resume point after a crash), the
quarter phases are saved at :meth:`Checkpoints.epoch` of the configured epoch count, ``best.nne``
when the monitored metric improves.
"""

from __future__ import annotations

import math

from nnjit.experiment.enums import Checkpoints
from nnjit.experiment.run_history import IDPS_COLUMNS, format_value, history_text, read_rows
from nnjit.io.atomic import atomic_write_text
from nnjit.train.builtin_callbacks import _Tracker, _usable_logs
from nnjit.train.callbacks import Callback

__all__ = ["RunCallback"]


class RunCallback(Callback):
    """Write ``idps.csv`` and the checkpoints of ``run`` after every epoch, atomically.

    Args:
        run: the :class:`~nnjit.experiment.run_folder.Run`.
        start_epoch: epochs already done (when resuming); rows after it are dropped.
        encoding: the run's TabularEncoding, stored in every checkpoint's metadata.
        monitor: metric for ``best.nne`` (default: ``run.config.train.monitor``, else
            ``val_loss`` when there is validation data, else ``train_loss``); its mode is
            ``run.config.train.mode``.
    """

    def __init__(self, run, start_epoch: int = 0, monitor: str | None = None,
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
        self._rows = [r for r in read_rows(run.path / "idps.csv")
                      if r and int(float(r[0])) <= self.start_epoch]

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
        row = [str(global_epoch)] + [format_value(logs.get(c)) for c in IDPS_COLUMNS[1:]]
        if self.per_batch:
            batches = trainer.batch_history_
            if batches is None:
                raise ValueError("RunCallback(per_batch=True) needs fit(..., log_batches=True)")
            for b in batches[batches["epoch"] == int(epoch)].itertuples():
                self._rows.append([str(global_epoch), str(b.batch), format_value(b.lr),
                                   format_value(b.train_loss), format_value(b.train_accuracy),
                                   "", "", ""])
            row.insert(1, "")
        self._rows.append(row)
        atomic_write_text(self.run.path / "idps.csv", history_text(self._rows, self.per_batch))

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

