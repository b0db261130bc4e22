"""Every data file nnjit reads is opened without blocking and refused unless it is a regular
file (issue 24, item 11): ``open()`` on a FIFO waits for a writer, for ever."""

from __future__ import annotations

import os
import threading

import pytest

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this system")


def _load_nne(path):
    from nnjit.io.nne import load_nne

    return load_nne(path)


def _load_weights(path):
    import nnjit as nn

    return nn.Sequential(nn.Linear(2, 2)).load_weights(path)


def _encoding(path):
    from nnjit.data.tabular_encoding import TabularEncoding

    return TabularEncoding.load(path)


def _history_rows(path):
    from pathlib import Path

    from nnjit.experiment.run_history import read_rows

    return read_rows(Path(path))


def _csv(path):
    from nnjit.experiment.data import load_run_data

    return load_run_data(str(path), False, 0, None)


READERS = {
    "load_nne": _load_nne,
    "load_weights": _load_weights,
    "encoding.json": _encoding,
    "idps.csv": _history_rows,
    "CSV data": _csv,
}


@pytest.mark.parametrize("reader", sorted(READERS))
def test_a_fifo_is_refused_without_blocking(tmp_path, reader):
    fifo = tmp_path / ("data.csv" if reader == "CSV data" else "file")
    os.mkfifo(fifo)
    outcome = {}

    def read():
        try:
            READERS[reader](fifo)
            outcome["result"] = "read"
        except (OSError, ValueError) as error:
            outcome["error"] = error

    thread = threading.Thread(target=read, daemon=True)  # (left blocked if the read blocks)
    thread.start()
    thread.join(20)
    if thread.is_alive():
        with open(fifo, "wb"):  # a writer that closes at once: the blocked open() returns
            pass
        thread.join(20)
        pytest.fail(f"{reader} blocked in open() on a FIFO")
    assert "not a regular file" in str(outcome.get("error")), outcome
