"""A run's history file, ``idps.csv``: its columns, how a value is written, reading it back.

:class:`~nnjit.experiment.run_callback.RunCallback` writes it after every epoch and
:meth:`Run.history <nnjit.experiment.run_folder.Run.history>` reads it; both take the format
from here, so the callback does not import the run folder (which offers ``Run.callback``).
"""

from __future__ import annotations

import csv
import io
import math

from nnjit.io.regular import open_regular

__all__ = ["IDPS_BATCH_COLUMNS", "IDPS_COLUMNS", "format_value", "history_text",
           "read_batch_history", "read_history", "read_rows"]

IDPS_COLUMNS = ("epoch", "lr", "train_loss", "train_accuracy", "val_loss", "val_accuracy",
                "seconds")
#: ``idps.csv`` columns when per-batch rows are asked for: one row per training batch (its
#: ``batch`` number, validation fields empty) before each epoch's row (``batch`` empty).
IDPS_BATCH_COLUMNS = ("epoch", "batch") + IDPS_COLUMNS[1:]


def format_value(value) -> str:
    """A field of ``idps.csv``: empty for None and NaN, an integer without ``.0``, else the
    float's ``repr`` (it reads back to the same float)."""
    if value is None:
        return ""
    value = float(value)
    if math.isnan(value):
        return ""
    if value.is_integer() and abs(value) < 2 ** 53:
        return str(int(value))
    return repr(value)


def history_text(rows: list[list[str]], per_batch: bool) -> str:
    """The whole ``idps.csv``: the header, then ``rows`` (fields already formatted)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(IDPS_BATCH_COLUMNS if per_batch else IDPS_COLUMNS)
    writer.writerows(rows)
    return out.getvalue()


def read_rows(path) -> list[list[str]]:
    """The rows of ``idps.csv`` at ``path`` as text, without the header (none when missing)."""
    if not path.exists():
        return []
    try:
        with open_regular(path, "r", encoding="utf-8", newline="") as fh:
            rows = list(csv.reader(fh))
    except (UnicodeDecodeError, csv.Error) as e:
        raise ValueError(f"{path}: not a readable idps.csv ({e})") from None
    return rows[1:]


def read_history(path):
    """``idps.csv`` at ``path`` as a DataFrame of its epoch rows (empty, with the columns,
    before the first epoch)."""
    import pandas as pd

    if not path.exists() or path.stat().st_size == 0:
        return pd.DataFrame({c: pd.Series(dtype="float64") for c in IDPS_COLUMNS})
    frame = _read_csv(path)
    if "batch" in frame.columns:  # a per-batch log: keep the epoch rows
        frame = frame[frame["batch"].isna()].drop(columns="batch").reset_index(drop=True)
    return frame


def read_batch_history(path):
    """The per-batch rows of ``idps.csv`` at ``path`` (empty when the run did not log
    batches)."""
    import pandas as pd

    frame = _read_csv(path) if path.exists() and path.stat().st_size else pd.DataFrame()
    if "batch" not in frame.columns:
        return pd.DataFrame({c: pd.Series(dtype="float64") for c in IDPS_BATCH_COLUMNS})
    rows = frame[frame["batch"].notna()].reset_index(drop=True)
    rows[["epoch", "batch"]] = rows[["epoch", "batch"]].astype("int64")
    return rows


def _read_csv(path):
    """``idps.csv`` through pandas; a damaged file (not UTF-8, not CSV) is a ValueError naming
    it (pandas' own errors do not)."""
    import pandas as pd

    try:
        with open_regular(path, "rb") as fh:  # (never a FIFO or a device)
            return pd.read_csv(fh)
    except ValueError as e:  # UnicodeDecodeError, ParserError, EmptyDataError
        raise ValueError(f"{path}: not a readable idps.csv ({type(e).__name__}: "
                         f"{str(e)[:200]})") from None
