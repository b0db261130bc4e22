"""What a fit shows and returns: its history frames, the per-epoch and summary lines, and the
progress rows of a fit whose single compiled call runs in a worker thread."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

import numpy as np

from nnjit.engine import fields
from nnjit.train.history import history_frame
from nnjit.train.interrupt import run_in_worker
from nnjit.train.run_state import RunState

if TYPE_CHECKING:  # pandas costs ~100 ms at import; it is loaded when the first history is built
    import pandas as pd


def fit_history(history: np.ndarray, state: RunState, start: int, monitor: str,
                classification: bool) -> pd.DataFrame:
    """The history of a fit's epochs ``start + 1 ..`` so far, a DataFrame built on first use
    (see :mod:`nnjit.train.history`); ``history`` rows up to the last epoch must not change.
    Its ``attrs`` come from the state as it is now, and are also made on first use."""
    row = state.row.tolist()  # Python floats, and a snapshot for the attrs
    end = max(int(row[fields.ST_EPOCH]), start)
    return history_frame(history[start:end], classification, partial(_attrs, row, monitor))


def _attrs(row: list, monitor: str) -> dict:
    """``history.attrs`` from a snapshot of the state row."""
    best = int(row[fields.ST_BEST_EPOCH])
    return {
        "monitor": monitor,
        "best_epoch": best + 1 if best >= 0 else None,  # absolute, 1-based
        "best_value": row[fields.ST_BEST] if best >= 0 else None,
        "restored_best": bool(row[fields.ST_RESTORED]),
        "stop_reason": ("early stopping: " + monitor + " did not improve")
        if row[fields.ST_STOPPED] else "reached the epoch limit",
    }


def batch_history(log: np.ndarray, state: RunState, classification: bool) -> pd.DataFrame:
    """``batch_history_`` from the compiled per-batch log, up to the last finished epoch."""
    import pandas as pd

    rows = log[(log[:, 0] > 0) & (log[:, 0] <= state.epoch)]  # finished epochs
    frame = pd.DataFrame(rows, columns=list(fields.BATCH_COLUMNS))
    frame[["epoch", "batch"]] = frame[["epoch", "batch"]].astype(np.int64)
    if not classification:
        frame["train_accuracy"] = np.nan
    return frame


def show_rows(bar, history: np.ndarray, state: RunState, shown: int,
              classification: bool, final: bool = False) -> int:
    """Feed the history rows the compiled loop finished since ``shown`` to the progress bar;
    returns the rows shown so far. ``final``: the fit is over (no time-left estimate)."""
    done = int(state.epoch)  # rows below it are complete (the row is written first)
    if bar.active and done > shown:  # one bar update per poll, with the latest row ...
        if not bar.advanced and done - shown > 1:  # ... after the first epoch's own, once
            bar.advance(1, _row_logs(history, shown, classification), final)
            shown += 1
        bar.advance(done - shown, _row_logs(history, done - 1, classification), final)
    return max(done, shown)


def _row_logs(history: np.ndarray, row: int, classification: bool) -> dict:
    logs = dict(zip(fields.HISTORY_COLUMNS, history[row].tolist()))
    if not classification:
        logs["train_accuracy"] = logs["val_accuracy"] = float("nan")
    return logs


def epoch_line(row) -> str:
    """The line ``verbose=2`` prints after every epoch."""
    parts = [f"epoch {int(row['epoch'])}", f"loss {row['train_loss']:.4f}"]
    if not np.isnan(row["val_loss"]):
        parts.append(f"val_loss {row['val_loss']:.4f}")
    if not np.isnan(row["val_accuracy"]):
        parts.append(f"val_accuracy {row['val_accuracy']:.4f}")
    parts.append(f"{row['seconds'] * 1e3:.2f} ms")
    return " - ".join(parts)


def summary_line(history: pd.DataFrame) -> str:
    """The line a verbose fit prints at its end."""
    if history.empty:
        return "fit: no epoch completed"
    last = history.iloc[-1]
    text = (f"fit: {len(history)} epochs of compiled training in {history['seconds'].sum():.3f} s "
            f"({history.attrs['stop_reason']}); final loss {last['train_loss']:.4f}")
    best = history.attrs.get("best_epoch")
    monitor = history.attrs.get("monitor")
    if best is not None and monitor in history.columns:
        value = history.attrs.get("best_value")  # the best epoch may precede initial_epoch
        text += f"; best {monitor} {value:.4f} at epoch {best}"
        if history.attrs.get("restored_best"):
            text += " (weights restored)"
    return text


#: Rows a fit paused every epoch adds to its history at a time (it doubles as epochs run).
HISTORY_CHUNK = 64

#: The most history (and per-batch log) bytes a fit allocates before it runs.
MAX_HISTORY_BYTES = 1 << 30


def history_rows(plan, rows: int, batches: int) -> int:
    """``rows`` history rows, at most the fit's ``epochs``; a ValueError naming ``epochs``
    when they (and the per-batch log) would exceed :data:`MAX_HISTORY_BYTES`."""
    rows = min(rows, plan.epochs)
    width = len(fields.HISTORY_COLUMNS) + (
        batches * len(fields.BATCH_COLUMNS) if plan.log_batches else 0)
    if rows * width * 8 > MAX_HISTORY_BYTES:
        raise ValueError(
            f"fit: epochs={plan.epochs} needs {rows * width * 8 / 2**30:,.1f} GiB of history "
            f"rows in one compiled call; pass fewer epochs, or a callback or verbose=2 (the fit "
            f"then pauses every epoch and its history grows as epochs run)")
    return rows


def _longer(array: np.ndarray, rows: int) -> np.ndarray:
    """``array`` copied into a zeroed array of ``rows`` rows."""
    out = np.zeros((rows, *array.shape[1:]), dtype=array.dtype)
    out[:len(array)] = array
    return out


def grown_history(args, rows: list, log, done: int, plan):
    """``(args, log)`` for a fit paused after ``done`` epochs: when the next epoch's row would
    not fit in ``rows[0]`` (the history array, replaced in it), the history and the per-batch
    ``log`` (or None) copied into longer arrays and put into the loop's ``args``."""
    done, have = int(done), len(rows[0])
    if done + 1 < have or have >= plan.epochs:  # (room for the next epoch's row)
        return args, log
    per_epoch = len(log) // have if log is not None else 0  # (batches per epoch)
    n = history_rows(plan, max(2 * have, done + HISTORY_CHUNK), per_epoch)
    rows[0] = _longer(rows[0], n)
    if log is not None:
        log = _longer(log, n * per_epoch)
    return args._replace(history=rows[0], batch_log=log if log is not None else
                         args.batch_log), log


def run_with_progress(trainer, run, stop, history: np.ndarray, plan) -> int:
    """Run the single compiled call ``run`` in a worker thread (it releases the GIL) while this
    (main) thread draws the progress bar from the history rows already written and turns
    Ctrl-C into a stop request that the compiled loop honours after the current epoch
    (:func:`nnjit.train.interrupt.run_in_worker`). Returns ``run``'s status."""
    from nnjit.train.progress import ProgressBar

    verbose = plan.verbose
    bar = ProgressBar() if verbose == 1 or verbose is True else ProgressBar(verbose=0)
    bar.on_train_begin(trainer, {"epochs": plan.epochs, "initial_epoch": plan.initial_epoch})
    shown = plan.initial_epoch
    state, classification = trainer._run_state, trainer.loss.is_classification

    def poll(final=False):
        nonlocal shown
        shown = show_rows(bar, history, state, shown, classification, final)

    def finish():
        poll(final=True)
        bar.on_train_end(trainer)

    return run_in_worker(run, stop, poll, finish)
