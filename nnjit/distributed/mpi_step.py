"""The MPI hooks of the compiled loop (entries of :mod:`nnjit.engine.dispatch`'s table during a
data-parallel fit): shard each global training batch, average its gradients with one in-place
Allreduce, sum the epoch's loss.

``MPI_Allreduce`` is called by its symbol name (a numba external function, resolved in the MPI
library that :class:`nnjit.distributed.MPI` loads), with the communicator, datatype and op handles
read from the run's config row at run time (``C_MPI_*``, written by
:class:`nnjit.engine.run_options.RunOptions`): nothing process-specific is compiled in, so
numba caches the MPI hooks like the other entries (ctypes function pointers, numba-mpi's way, are
addresses baked into the code and cannot be cached). Importing this module imports mpi4py.
"""

import numpy as np
from mpi4py import MPI as _MPI
from numba import types

from nnjit.engine.fields import (
    C_MPI_COMM,
    C_MPI_DATATYPE,
    C_MPI_DOUBLE,
    C_MPI_IN_PLACE,
    C_MPI_RANK,
    C_MPI_RANKS,
    C_MPI_SUM,
    ST_ALLREDUCE_NS,
    ST_BATCH_LOSS,
    ST_TRAIN_LOSS,
    TASK_FIT,
)
from nnjit.kernels._jit import jit
from nnjit.kernels.clock import monotonic_ns

# MPI handles are pointers (Open MPI) or ints (MPICH): the C signature follows mpi4py's library.
HANDLE_BYTES = _MPI._sizeof(_MPI.Comm)
_HANDLE = types.intp if HANDLE_BYTES == 8 else types.int32
#: int MPI_Allreduce(const void *send, void *recv, int count, MPI_Datatype, MPI_Op, MPI_Comm)
_allreduce = types.ExternalFunction(
    "MPI_Allreduce", types.int32(types.intp, types.intp, types.int32, _HANDLE, _HANDLE, _HANDLE))

_TRAIN_SUMS = 3  # ST_TRAIN_LOSS, ST_TRAIN_CORRECT, ST_TRAIN_N


@jit(inline="always")
def _handle(cfg, field):
    """An MPI handle of the config row, as the integer it is (exact in a float64)."""
    return np.int64(cfg[field])


def shard_rows(task, start, rows, cfg):
    """This rank's contiguous part of the fit's training batch ``[start, start + rows)``: rank r
    of R takes rows ``rows * r // R`` to ``rows * (r + 1) // R`` of it."""
    ranks = np.int64(cfg[C_MPI_RANKS])
    if task != TASK_FIT or ranks < 1:
        return start, rows
    rank = np.int64(cfg[C_MPI_RANK])
    first = rows * rank // ranks
    return start + first, rows * (rank + 1) // ranks - first


def sync_gradients(pgrads, state, rows, global_rows, cfg):
    """Turn this rank's mean gradient over its ``rows`` into the mean over the global batch's
    ``global_rows``: scale by rows / global_rows, then one in-place Allreduce (sum) of the flat
    gradient block. A rank whose loss is not finite poisons the sum with a NaN, so every rank
    sees the divergence at the same step and stops together (no rank waits in the next
    Allreduce). The time spent in the Allreduce (waiting for the other ranks included) adds up
    in the run state's ``ST_ALLREDUCE_NS``. Returns (``global_rows``, the global batch
    diverged)."""
    if not np.isfinite(state[ST_BATCH_LOSS]):
        pgrads[0] = np.nan
    scale = pgrads.dtype.type(rows / global_rows)
    for k in range(pgrads.size):
        pgrads[k] *= scale
    t0 = monotonic_ns()
    _allreduce(_handle(cfg, C_MPI_IN_PLACE), pgrads.ctypes.data, pgrads.size,
               _handle(cfg, C_MPI_DATATYPE), _handle(cfg, C_MPI_SUM),
               _handle(cfg, C_MPI_COMM))  # (errors abort: ERRORS_ARE_FATAL)
    state[ST_ALLREDUCE_NS] += monotonic_ns() - t0
    return global_rows, not np.isfinite(pgrads[0])


def sync_epoch(state, cfg):
    """Sum the epoch's training loss, correct count and rows over the ranks (one Allreduce of
    three float64 per epoch), so the history and early stopping see the global batches'."""
    sums = state[ST_TRAIN_LOSS : ST_TRAIN_LOSS + _TRAIN_SUMS]
    return _allreduce(_handle(cfg, C_MPI_IN_PLACE), sums.ctypes.data, _TRAIN_SUMS,
                      _handle(cfg, C_MPI_DOUBLE), _handle(cfg, C_MPI_SUM),
                      _handle(cfg, C_MPI_COMM))
