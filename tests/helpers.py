"""Helpers shared by several test files."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import numpy as np


def installed_nnjit() -> str:
    """The installed ``nnjit`` console script: the one next to this Python (the venv's, even when
    the venv is not activated), else the first on PATH."""
    found = shutil.which("nnjit", path=os.pathsep.join([str(Path(sys.executable).parent),
                                                          os.environ.get("PATH", "")]))
    assert found, "the nnjit console script is not installed (pip install -e .)"
    return found


def count_allocations(run, repeats=(1, 50)) -> list[int]:
    """NRT allocations made by ``run(k)`` for each k in ``repeats`` (call ``run`` once first).

    Enables numba's allocation statistics in-process (they are off unless NUMBA_NRT_STATS=1).
    Every call from Python boxes its array arguments, which costs a fixed number of allocations;
    steady-state code allocates nothing iff the counts are equal for every k.
    """
    from numba.core.runtime import _nrt_python, rtsys

    was_enabled = _nrt_python.memsys_stats_enabled()
    _nrt_python.memsys_enable_stats()
    try:
        counts = []
        for k in repeats:
            before = rtsys.get_allocation_stats().alloc
            run(k)
            counts.append(rtsys.get_allocation_stats().alloc - before)
        return counts
    finally:
        if not was_enabled:
            _nrt_python.memsys_disable_stats()


def finite_difference_gradients(trainer, model, X, Y, eps: float = 1e-6) -> dict[str, np.ndarray]:
    """Central finite differences of ``trainer.evaluate(X, Y)['loss']`` for every parameter."""
    grads = {}
    for name, p in model.named_parameters():
        g = np.zeros(p.shape)
        flat = p.data.reshape(-1)
        for k in range(flat.size):
            old = flat[k]
            flat[k] = old + eps
            up = trainer.evaluate(X, Y)["loss"]
            flat[k] = old - eps
            down = trainer.evaluate(X, Y)["loss"]
            flat[k] = old
            g.reshape(-1)[k] = (up - down) / (2 * eps)
        grads[name] = g
    return grads


def plotly_figures(page: str) -> list[dict]:
    """The figures of an HTML page written with plotly's ``to_html``: one dict per
    ``Plotly.newPlot(id, data, layout, ...)`` call, ``{"id", "data", "layout"}``, with the
    typed arrays (``{"dtype", "bdata", "shape"}``) decoded to NumPy arrays.

    The page is parsed with the standard library's HTML parser (script elements) and JSON
    decoder, so a figure whose data is not valid JSON fails here."""
    import base64
    import json
    from html.parser import HTMLParser

    class Scripts(HTMLParser):
        def __init__(self):
            super().__init__()
            self.scripts, self._in = [], False

        def handle_starttag(self, tag, attrs):
            if tag == "script":
                self._in = True
                self.scripts.append("")

        def handle_endtag(self, tag):
            if tag == "script":
                self._in = False

        def handle_data(self, data):
            if self._in:
                self.scripts[-1] += data

    def decode(value):
        if isinstance(value, dict):
            if set(value) >= {"dtype", "bdata"}:
                arr = np.frombuffer(base64.b64decode(value["bdata"]), dtype=value["dtype"])
                if "shape" in value:
                    shape = value["shape"]
                    shape = [int(s) for s in shape.split(",")] if isinstance(shape, str) else shape
                    arr = arr.reshape(shape)
                return arr
            return {k: decode(v) for k, v in value.items()}
        if isinstance(value, list):
            return [decode(v) for v in value]
        return value

    parser = Scripts()
    parser.feed(page)
    figures = []
    decoder = json.JSONDecoder()
    for script in parser.scripts:
        start = 0
        while (at := script.find("Plotly.newPlot(", start)) >= 0:
            pos = at + len("Plotly.newPlot(")
            args = []
            for _ in range(3):
                while script[pos] in " \n\t,":
                    pos += 1
                value, pos = decoder.raw_decode(script, pos)
                args.append(value)
            figures.append({"id": args[0], "data": decode(args[1]), "layout": decode(args[2])})
            start = pos
    return figures
