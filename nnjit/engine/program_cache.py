"""A process-wide cache of laid-out programs, keyed on everything that shapes a model's records.

A grid search fits the same architecture hundreds of times in one process; tracing ``forward``
and laying out the arena cost a small fit more than its epochs do. As ``jax.jit`` caches a
trace by the shapes it was made for, the layout service (:mod:`nnjit.train.layout_service`,
which lays out every Trainer's and nnjit.sklearn's models) looks up a :meth:`Program.template`
by its model's *structure* before it traces, and makes a fresh :meth:`Program.instance` (zeroed
arenas, its own seed) from it on a hit.

The key must never let a model reuse a layout it would not have traced itself, so it is only
made for what it can describe completely, and is None otherwise (the service then traces):

* every module is one of nnjit's own layers (a user's ``forward`` may read anything: globals,
  closures), keyed by its class, its path in the model, its train/eval flag and every attribute
  (sizes, activation settings, dropout rates, ``init``...); an attribute that is not a plain
  value (number, string, bool, None, dtype, or a tuple of them) makes the model uncacheable;
* each parameter and buffer by name, shape, dtype and ``requires_grad``, and which ones are the
  same object (tied weights);
* the loss (class and plain attributes), the arena dtype, the input specs (row shapes, integer
  or float), the rows of a batch the arena holds, and the targets' width;
* graph models and models with Python ops (:class:`nnjit.Op`) are never cached
  (:attr:`Program.reusable`).

The optimizer, the regularizer, learning rates and the data's values are not part of a layout
(the trainer binds them to each instance), so changing them reuses it.
"""

from __future__ import annotations

import functools
import threading
from collections import OrderedDict

import numpy as np

from nnjit.tape.tape import Node, SlotSpec

MAX_ENTRIES = 64  # layouts kept (least recently used dropped first); each holds no arena

_FRAMEWORK_ATTRIBUTES = frozenset(  # Module's own bookkeeping, keyed separately or irrelevant
    ("_parameters", "_buffers", "_modules", "_provisional", "_path", "_trainer",
     "_run_guard"))  # (nnjit.train.exclusive: the model's lock)
_SCALARS = (int, float, bool, str, type(None), np.dtype)
_DIRECT = frozenset((int, bool, str, type(None)))  # kept as they are (floats: by their hex)
_MODULE, _TENSOR = object(), object()  # (a structure key's markers: never an attribute's value)

# What a traced_key reads of each op and slot: every field (a field added later is keyed too),
# but the ones the layout derives (accumulate) or that make a tape uncacheable (python_op).
_NODE_FIELDS = tuple(f for f in Node.__slots__ if f not in ("accumulate", "python_op"))
_SLOT_FIELDS = tuple(SlotSpec.__slots__)

_lock = threading.Lock()  # (fits run in threads: joblib's threading backend)
_entries: OrderedDict[tuple, object] = OrderedDict()
_output_cols: dict[tuple, int] = {}
# The stored structure keys, each under itself: structure_key returns the stored Key when the
# new one equals it, so the fit's further lookups (output width, instance, a fresh fit's record)
# find it by identity instead of comparing every part of the model again.
_interned: dict[Key, Key] = {}
stats = {"hits": 0, "misses": 0}  # lookups since the process started (tests read them)


class Key:
    """A cache key: the key's parts (a nested tuple) and their hash, computed once (a tuple
    does not keep its hash, and a fit looks its key up three times: hashing a model's parts
    again each time cost more than the rest of the lookup)."""

    __slots__ = ("parts", "_hash")

    def __init__(self, parts: tuple):
        self.parts = parts
        self._hash = hash(parts)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other) -> bool:
        return (self is other or type(other) is Key and self._hash == other._hash
                and self.parts == other.parts)

    def __repr__(self) -> str:
        return f"Key({self.parts!r})"


def structure_key(modules, named_params, named_buffers, loss, specs, rows: int,
                  dtype) -> Key | None:
    """The key of a model traced for ``specs`` with ``rows`` rows per batch in ``dtype``, or None
    when the model is not fully described by it (see the module docstring).

    Args:
        modules: ``[(path, module)]`` from :func:`nnjit.nn.walk.walk_modules`.
        named_params, named_buffers: ``[(dotted name, tensor)]``, each tensor once, in trace
            order.
        loss: the trainer's loss object.
    """
    # One flat tuple (hashed and compared in one pass, no small tuple per part): the markers
    # open each module's and each tensor's fields, attributes come as (name, type, value)
    # triples, so no two structures give the same sequence.
    parts: list = [np.dtype(dtype).str, specs, int(rows), type(loss)]
    if not _add_attributes(parts, loss, ()):
        return None
    append = parts.append
    for path, module in modules:
        cls = type(module)
        if not _nnjit_class(cls):
            return None
        append(_MODULE)
        append(path)
        append(cls)
        if not _add_attributes(parts, module, _FRAMEWORK_ATTRIBUTES):
            return None
    # (each tensor once: its position is the index a tie would share; walk_model lists a
    # shared one once)
    for index, (name, tensor) in enumerate(named_params + named_buffers):
        data = tensor.data
        parts += (_TENSOR, name, data.shape, data.dtype.str,
                  bool(getattr(tensor, "requires_grad", True)), index)
    key = Key(tuple(parts))
    return _interned.get(key, key)  # (the one full comparison of this fit's key)


@functools.cache
def _nnjit_class(cls) -> bool:
    """Whether ``cls`` is one of nnjit's own classes (its module under ``nnjit.``)."""
    return cls.__module__.startswith("nnjit.")


def traced_key(tape, inputs, target, output, loss) -> Key | None:
    """The key of a layout by what was traced: every op (opcode, slots, aux, owner, which
    inputs take a gradient), every slot spec, the op hyper-parameters, the inputs' row shapes,
    the parameter names and the roles of the target, output and loss slots. Two tapes with the
    same key make the same :class:`Program` but for its arenas and RNG, whatever the models'
    classes, so a model the structure key cannot describe (a user's ``forward``) is traced but
    not laid out again. None for tapes with Python ops, a graph or constants."""
    if tape.python_ops or tape.graph is not None or tape.constants:
        return None
    nodes = tuple(tuple(_listless(getattr(node, f)) for f in _NODE_FIELDS) for node in tape.nodes)
    slots = tuple((type(spec.rows),) + tuple(getattr(spec, f) for f in _SLOT_FIELDS)
                  for spec in tape.slots)
    xs = (inputs,) if not isinstance(inputs, tuple) else inputs
    return Key(("traced", tape.dtype.str, int(tape.max_batch), nodes, slots,
                tuple(float(h).hex() for h in tape.hyper),
                tuple((x.slot, tuple(x.dims), bool(x.is_integer)) for x in xs),
                target.slot, output.slot, loss.slot, tuple(tape.param_slots.items())))


def _listless(value):
    return tuple(value) if isinstance(value, list) else value


def _add_attributes(parts: list, obj, skip) -> bool:
    """Append ``obj``'s instance attributes to ``parts`` as ``name, type, value`` triples (a
    float by its hex, a tuple by :func:`_plain`); False when one is not a plain value (or
    ``obj`` has no ``__dict__``)."""
    attributes = getattr(obj, "__dict__", None)
    if attributes is None:
        return False
    append = parts.append
    for name, value in attributes.items():
        if name in skip:
            continue
        kind = type(value)
        if kind in _DIRECT:  # (most attributes: sizes, flags, names; read without a call)
            parts += (name, kind, value)
            continue
        frozen = _plain(value)
        if frozen is None:
            return False
        append(name)
        parts += frozen
    return True


def _plain(value):
    """A hashable form of a plain value that tells apart values that compare equal across types
    (``True``, ``1``, ``1.0``) and floats that compare equal (``0.0``, ``-0.0``); None when the
    value is not plain."""
    kind = type(value)
    if kind is float:
        return (float, value.hex())
    if kind in _SCALARS:
        return (kind, value)
    if kind is tuple:
        items = tuple(_plain(v) for v in value)
        return None if any(i is None for i in items) else (tuple, items)
    return None


def output_cols(key: Key | None) -> int | None:
    """The output width of the model of ``key`` when it has been laid out before, else None."""
    if key is None:
        return None
    return _output_cols.get(key)


def instance(key: Key | None, target_cols: int, seed: int):
    """A fresh :class:`Program` for ``key`` with ``target_cols`` target columns, or None (a
    miss: trace and :func:`store`)."""
    if key is None:
        return None
    with _lock:
        template = _entries.get((key, target_cols))
        if template is None:
            stats["misses"] += 1
            return None
        _entries.move_to_end((key, target_cols))
        stats["hits"] += 1
    return template.instance(seed)


def store(key: Key | None, target_cols: int, program) -> None:
    """Keep ``program``'s layout for ``key`` (when it is :attr:`~Program.reusable`)."""
    if key is None or not program.reusable:
        return
    template = program.template()
    with _lock:
        _entries[(key, target_cols)] = template
        _output_cols[key] = program.output_cols
        _interned.setdefault(key, key)
        while len(_entries) > MAX_ENTRIES:
            (old_key, _), _ = _entries.popitem(last=False)
            if not any(k == old_key for k, _ in _entries):
                _output_cols.pop(old_key, None)
                _interned.pop(old_key, None)


def clear() -> None:
    """Forget every cached layout (the next fit of every model traces)."""
    with _lock:
        _entries.clear()
        _output_cols.clear()
        _interned.clear()
