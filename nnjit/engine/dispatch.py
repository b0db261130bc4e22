"""The dispatch table: every op family, job loader and hook compiled once per dtype, on its own,
and called by the interpreter through its address.

The interpreter (:func:`nnjit.engine.interpreter.execute`) is compiled once per arena dtype (and
argument types). It takes a table (an int64 array, :func:`table`) of function addresses: the
forward and backward dispatchers of the program's op families beyond the core, the job loader
and the data-parallel hooks. Each entry is a separately compiled, separately cached numba
function with one fixed signature, so a model that mixes families already compiled (conv,
pooling, batch norm, embedding, ...) compiles nothing: the table is built from cache entries, and
its type does not depend on which entries it holds. The interpreter calls an address through
:func:`nnjit.engine.native_call.caller`.

Table layout (:data:`T_WIDTH` columns): row 0 holds the hooks, ``(address, signature key)`` pairs
at :data:`T_LOADER`, :data:`T_SHARD_ROWS`, :data:`T_SYNC_GRADIENTS`, :data:`T_SYNC_EPOCH` and
:data:`T_OPTIMIZER` (a fit's optimizer step: only the optimizers in use are compiled); each
further row one family: its opcodes ``[T_FIRST, T_STOP)``, then the forward and backward pairs at
:data:`T_FORWARD` and :data:`T_BACKWARD`.

Each entry's name carries its family's name, opcode block, the dtype and the family's
:meth:`~nnjit.ops.OpFamily.source_digest`: numba caches machine code by function name and file and
does not notice an edited kernel in another file, so another version of a family must mean
another name (its cache entry is then compiled anew, alone).
"""

from __future__ import annotations

import functools
import hashlib

import numpy as np
from numba import types
from numba.np.numpy_support import from_dtype

from nnjit.engine import compile_notice
from nnjit.engine.batch_loading import load_augmented_rows, load_rows
from nnjit.engine.native_call import address_of, signature_key
from nnjit.kernels import optim as ko
from nnjit.kernels._jit import jit, renamed_copy
from nnjit.ops.family import OpFamily

T_WIDTH = 10
# row 0: (address, key) pairs
T_LOADER, T_SHARD_ROWS, T_SYNC_GRADIENTS, T_SYNC_EPOCH, T_OPTIMIZER = 0, 2, 4, 6, 8
T_FIRST, T_STOP, T_FORWARD, T_BACKWARD = 0, 1, 2, 4  # family rows

_INT = types.int64
_F64 = types.Array(types.float64, 1, "C")
_I64_1D = types.Array(types.int64, 1, "C")
_I64_2D = types.Array(types.int64, 2, "C")
_I32_2D = types.Array(types.int32, 2, "C")
_CFG = types.Array(types.float64, 1, "C", readonly=True)  # RunOptions.config_row()


def arena_type(dtype) -> types.Array:
    """The numba type of an arena of ``dtype`` (a flat C array)."""
    return types.Array(from_dtype(np.dtype(dtype)), 1, "C")


def ctx_type(dtype) -> types.Tuple:
    """The type of the ``ctx`` tuple the interpreter hands to family dispatchers
    (:mod:`nnjit.ops.context`) for an arena of ``dtype``."""
    return _ctx_type(np.dtype(dtype).name)


@functools.cache
def _ctx_type(dtype: str) -> types.Tuple:
    arena = arena_type(dtype)
    return types.Tuple((types.boolean, _INT, _I32_2D, _I64_2D, _F64, arena, arena, _I64_1D,
                        arena, _I64_1D, _F64, _INT, _F64))


def family_signature(dtype, _=None):
    """``bool(op, record index, ctx)``: every family dispatcher entry's signature."""
    return types.boolean(_INT, _INT, ctx_type(dtype))


def _family_forward(op, i, ctx):
    return _dispatch_forward(op, i, ctx)


def _family_backward(op, i, ctx):
    return _dispatch_backward(op, i, ctx)


def _no_family(op, i, ctx):
    return False


_dispatch_forward = _dispatch_backward = _no_family  # (each entry's copy names its own)


def _digest(*parts: str) -> str:
    return hashlib.sha256("".join(parts).encode()).hexdigest()[:16]


class Entry:
    """A piece of the table: what the compile notice calls it, how to make its dispatchers for
    a dtype (one, or a family's forward and backward), and their signature (made and compiled
    on first use)."""

    def __init__(self, what: str, make, signature):
        self.what = what
        self._make = make
        self._signature = signature
        self._made: dict = {}  # dtype (and argument types) -> (dispatchers, ((address, key), ...))

    def addresses(self, dtype, args_types=None) -> tuple[tuple[int, int], ...]:
        """``(address, signature key)`` of each of the entry's functions for ``dtype``,
        compiled (or loaded from numba's cache) for their one signature on first use; the
        dispatchers stay alive with this entry, so the addresses do too."""
        dtype = np.dtype(dtype).name
        key = dtype if args_types is None else (dtype, args_types)
        made = self._made.get(key)
        if made is None:
            functions = self._make(dtype)
            signature = self._signature(dtype, args_types)
            compile_notice.compile_now([(fn, signature) for fn in functions], self.what, dtype)
            made = self._made[key] = (functions, tuple(
                (address_of(fn, signature), signature_key(signature.return_type, signature.args))
                for fn in functions))
        return made[1]

    def address(self, dtype, args_types=None) -> tuple[int, int]:
        """``(address, signature key)`` of an entry of one function."""
        return self.addresses(dtype, args_types)[0]


@functools.cache
def family_entry(family: OpFamily) -> Entry:
    """The :class:`Entry` of ``family``: its forward and backward dispatchers."""
    def make(dtype):
        suffix = f"{family.name}{family.block.start}_{dtype}_{_digest(family.source_digest())}"
        return (jit(renamed_copy(_family_forward, suffix, {"_dispatch_forward": family.forward})),
                jit(renamed_copy(_family_backward, suffix,
                                 {"_dispatch_backward": family.backward})))

    return Entry(f"the {family.name} family", make, family_signature)


# -- job loaders ---------------------------------------------------------------------------------
def loader_signature(dtype, data_types):
    """``rows(src_x, src_y, perm, use_perm, start, rows, with_targets, values, slots, layout,
    cfg, gdata, rng)`` for X, Y and perm of ``data_types`` (their numba types); ``cfg`` is the
    run's read-only config row (a fit's augmentation). The interpreter's call and the graph
    family's loader (:func:`nnjit.graph.sampled_batch.load_graph_job`) pass exactly these: a
    mismatch returns status BAD_TABLE instead of calling."""
    x_type, y_type, perm_type = data_types
    return _INT(x_type, y_type, perm_type, types.boolean, _INT, _INT, types.boolean,
                arena_type(dtype), _I64_2D, _I64_1D, _CFG, _I64_1D, _I64_1D)


def _load_job(src_x, src_y, perm, use_perm, start, rows, with_targets, values, slots, layout,
              cfg, gdata, rng):
    return _loader(src_x, src_y, perm, use_perm, start, rows, with_targets, values, slots,
                   layout, cfg, gdata, rng)


_loader = load_rows  # (each entry's copy names its own)


def _loader_entry(what: str, loader, name: str) -> Entry:
    def make(dtype):
        return (jit(renamed_copy(_load_job, f"{name}_{dtype}", {"_loader": loader})),)

    return Entry(what, make, loader_signature)


_PLAIN_LOADER = _loader_entry("the batch loader", load_rows, "plain")
_AUGMENT_LOADER = _loader_entry("the augmenting batch loader", load_augmented_rows, "augment")


@functools.cache
def _family_loader(family: OpFamily) -> Entry:
    return _loader_entry(f"the {family.name} batch loader", family.load_job,
                         f"{family.name}{family.block.start}_{_digest(family.source_digest())}")


def loader_entry(families, augment: bool) -> Entry:
    """The job loader of a program using ``families``: the family's own (at most one family
    has one: the graph family's sampled batches), the augmenting loader, or the plain one."""
    loaders = [f for f in families if f.load_job is not None]
    if len(loaders) > 1 or (loaders and augment):
        raise ValueError("one program uses op families that each load jobs their own way ("
                         + ", ".join(f.name for f in loaders) + (", augmentation" if augment
                                                                  else "") + "): at most one may")
    if augment:
        return _AUGMENT_LOADER
    return _family_loader(loaders[0]) if loaders else _PLAIN_LOADER


# -- data-parallel hooks -------------------------------------------------------------------------
# They read the run's MPI handles from the config row (C_MPI_*) and add the Allreduce time to the
# run state (ST_ALLREDUCE_NS).
def _shard_rows_signature(dtype, _):
    """``(start, rows) = shard_rows(task, start, rows, cfg)``."""
    return types.UniTuple(_INT, 2)(_INT, _INT, _INT, _CFG)


def _sync_gradients_signature(dtype, _):
    """``(penalty rows, diverged) = sync_gradients(pgrads, state, rows, global_rows, cfg)``."""
    return types.Tuple((_INT, types.boolean))(arena_type(dtype), _F64, _INT, _INT, _CFG)


def _sync_epoch_signature(dtype, _):
    """``status = sync_epoch(state, cfg)``."""
    return _INT(_F64, _CFG)


def _one_process_shard_rows(task, start, rows, cfg):
    """This process's (start, rows) of a training batch: all of it outside an MPI fit."""
    return start, rows


def _one_process_sync_gradients(pgrads, state, rows, global_rows, cfg):
    """(rows the step's penalty counts, the global batch diverged): (rows, False) here."""
    return rows, False


def _one_process_sync_epoch(state, cfg):
    """Sum the epoch's training loss counters over the ranks (nothing here)."""
    return 0


def _hook_entries(suffix: str, shard_rows, sync_gradients, sync_epoch, what: str):
    def make(fn):
        return lambda dtype: (jit(renamed_copy(fn, f"{dtype}_{suffix}")),)

    return (Entry(what, make(shard_rows), _shard_rows_signature),
            Entry(what, make(sync_gradients), _sync_gradients_signature),
            Entry(what, make(sync_epoch), _sync_epoch_signature))


_ONE_PROCESS = _hook_entries("one", _one_process_shard_rows, _one_process_sync_gradients,
                             _one_process_sync_epoch, "the training loop's hooks")


_MPI_HOOKS: list = []  # the MPI hooks' entries, once nnjit.distributed provides them


def provide_mpi_hooks(shard_rows, sync_gradients, sync_epoch, version: str) -> None:
    """Make the MPI hooks (:mod:`nnjit.distributed.mpi_step`, which imports mpi4py) entries of
    the table: called by :class:`nnjit.distributed.MPI` (the engine imports nothing above it).
    ``version`` names their build (numba does not see edits of another file)."""
    if not _MPI_HOOKS:
        _MPI_HOOKS.extend(_hook_entries(f"mpi_{version}", shard_rows, sync_gradients,
                                        sync_epoch, "the MPI hooks"))


def _mpi_hooks():
    if not _MPI_HOOKS:
        raise RuntimeError("a data-parallel run needs the MPI hooks: make an nnjit.MPI() first")
    return tuple(_MPI_HOOKS)


# -- optimizer steps -----------------------------------------------------------------------------
def _optimizer_signature(dtype, _):
    arena = arena_type(dtype)
    return types.boolean(_INT, arena, arena, types.Array(arena.dtype, 2, "C"), _F64,
                         types.float64, _INT)


def _optimizer_template(kind, params, grads, opt_state, opt_hyper, lr, step):
    return _step(kind, params, grads, opt_state, opt_hyper, lr, step)


_step = ko.sgd_step  # (each entry's copy names its own)


@functools.cache
def _optimizer_entry(name: str, step) -> Entry:
    def make(dtype):
        return (jit(renamed_copy(_optimizer_template, f"{name}_{dtype}", {"_step": step})),)

    return Entry(f"the {name} step", make, _optimizer_signature)


def optimizer_entry(kind: int) -> Entry:
    """The compiled step of optimizer ``kind`` (``nnjit.optim``'s ``kind``, ``OPT_*``)."""
    if kind not in ko.STEPS:
        raise ValueError(f"no compiled step for optimizer kind {kind!r} (known: "
                         f"{', '.join(map(str, sorted(ko.STEPS)))})")
    return _optimizer_entry(*ko.STEPS[kind])


def table(families, dtype, data_types, *, augment: bool = False, mpi: bool = False,
          optimizer: int | None = None) -> np.ndarray:
    """The table for one run of a program using ``families`` on an arena of ``dtype`` with X,
    Y and perm of ``data_types`` (numba types): every entry compiled now (or loaded from numba's
    cache), each announced by the compile notice when it really compiles. The core families
    are left out: the interpreter inlines them. ``optimizer``: a fit's optimizer kind (None: a
    run that takes no step; its column then holds no address, and a step would stop the run
    with BAD_TABLE)."""
    if augment and mpi:
        raise ValueError("augmentation and MPI have no build together")
    extra = [f for f in families if not f.core]
    rows = np.zeros((1 + len(extra), T_WIDTH), dtype=np.int64)
    hooks = _mpi_hooks() if mpi else _ONE_PROCESS
    entries = (loader_entry(families, augment), *hooks)
    for column, entry in zip((T_LOADER, T_SHARD_ROWS, T_SYNC_GRADIENTS, T_SYNC_EPOCH), entries):
        rows[0, column : column + 2] = entry.address(
            dtype, data_types if column == T_LOADER else None)
    if optimizer is not None:
        rows[0, T_OPTIMIZER : T_OPTIMIZER + 2] = optimizer_entry(optimizer).address(dtype)
    for row, family in enumerate(extra, start=1):
        forward, backward = family_entry(family).addresses(dtype)
        rows[row, T_FIRST], rows[row, T_STOP] = family.block.start, family.block.stop
        rows[row, T_FORWARD : T_FORWARD + 2] = forward
        rows[row, T_BACKWARD : T_BACKWARD + 2] = backward
    return rows
