"""The arrays one compiled call reads, by name: :class:`LoopArrays`, gathered in one place
(:meth:`nnjit.engine.program.Program.loop_arrays`), and :class:`StepArrays`, the part a run's
optimizer, regularizer and schedule bring.

``execute`` is called as ``execute(*arrays)``: numba gets the fields one by one, never the named
tuple (a tuple holding Python objects is typed slowly, on every call), so the compiled loop keeps
its positional signature and its cache.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np


class StepArrays(NamedTuple):
    """What a run's optimizer step reads and writes besides the program (empty arrays where a
    run does not use one: inference, no schedule, no accumulation)."""

    opt_hyper: np.ndarray  # the optimizer's hyperparameters (float64)
    opt_state: np.ndarray  # its buffers (velocities, moments), arena dtype
    reg_spans: np.ndarray  # the penalised parameter spans (int64, (k, 2))
    lr_table: np.ndarray  # the learning rate of each step (empty: the state's, throughout)
    plateau: np.ndarray  # ReduceLROnPlateau's parameters and state (empty: none)
    accum: np.ndarray  # the accumulated gradient (empty: one step per minibatch)


class LoopArrays(NamedTuple):
    """The arguments of :func:`nnjit.engine.interpreter.execute`, in its order (a test checks
    the names against its signature)."""

    task: int  # TASK_*
    records: np.ndarray  # the program: its op records, slot table, op hyperparameters
    slots: np.ndarray
    hyper: np.ndarray
    values: np.ndarray  # the arenas
    grads: np.ndarray
    rng: np.ndarray  # the model's RNG state
    layout: np.ndarray  # the program layout vector (never written)
    X: np.ndarray  # the data (read-only views), the batch order
    Y: np.ndarray
    Xv: np.ndarray
    Yv: np.ndarray
    perm: np.ndarray
    cfg: np.ndarray  # the run's config row (RunOptions.config_row(), read-only)
    opt_hyper: np.ndarray  # StepArrays' fields
    opt_state: np.ndarray
    reg_spans: np.ndarray
    lr_table: np.ndarray
    plateau: np.ndarray
    accum: np.ndarray
    state: np.ndarray  # the run state row
    best: np.ndarray  # the best-weights snapshot
    history: np.ndarray  # per-epoch rows
    batch_log: np.ndarray  # per-batch rows (no rows: not logged)
    out: np.ndarray  # PREDICT's outputs
    gdata: np.ndarray  # the graph data
    table: np.ndarray  # the dispatch table (nnjit.engine.dispatch)
