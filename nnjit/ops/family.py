"""Op families and their registry.

A family is one module holding a group of ops: their :class:`~nnjit.ops.OpSpec` s, the kernels
(or imports of them from ``nnjit/kernels/``), the recorders, and one compiled dispatcher per
direction, ``forward(op, i, ctx) -> bool`` and ``backward(op, i, ctx) -> bool`` with one branch
per opcode and a final ``return False`` (the compiled loop stops with UNKNOWN_OPCODE on False).
The interpreter replays families, not ops: the core families are inlined in it, every other
family is compiled on its own, once per dtype, the first time a traced program uses it (an entry
of the dispatch table, :mod:`nnjit.engine.dispatch`), whatever families it is mixed with.
"""

from __future__ import annotations

import functools
import re
from typing import Callable

from nnjit.kernels.source_reach import reach_digest
from nnjit.ops.spec import OpSpec
from nnjit.tape import tape as _tape

USER_FIRST_OPCODE = 1000  # families registered without first_opcode get blocks from here up
USER_BLOCK = 100
MAX_OPCODE = 2**31 - 1  # records are int32


class OpFamily:
    """A group of ops compiled together: specs, dispatchers, and an optional job loader.

    Args:
        name: identifier-like family name (``"graph"``, ``"silu"``), unique.
        specs: the ops, in opcode order: op ``k`` gets opcode ``first_opcode + k``.
        forward: compiled ``forward(op, i, ctx) -> bool`` (``@nnjit.ops.dispatcher``).
        backward: compiled ``backward(op, i, ctx) -> bool``.
        core: inlined in the compiled loop (nnjit's own dense, activation and loss families
            only: what every MLP runs); any other family is an entry of its dispatch table.
        first_opcode: the block's first opcode; None (user families) takes the next free block
            of 100 from 1000 up at :func:`register`.
        load_job: a compiled job loader replacing the plain row loader in runs of programs that
            use this family (the graph family's sampled batches); at most one per program.
    """

    def __init__(self, name: str, specs, forward: Callable, backward: Callable, *,
                 core: bool = False, first_opcode: int | None = None,
                 load_job: Callable | None = None):
        if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise ValueError(f"OpFamily name {name!r}: use an identifier ('silu', 'graph')")
        specs = tuple(specs)
        if not specs or not all(isinstance(s, OpSpec) for s in specs):
            raise TypeError(f"OpFamily {name!r}: specs must be a non-empty sequence of OpSpec")
        names = [s.name for s in specs]
        if len(set(names)) != len(names):
            raise ValueError(f"OpFamily {name!r}: op names repeat: {names}")
        for what, fn in (("forward", forward), ("backward", backward)):
            if not callable(fn):
                raise TypeError(f"OpFamily {name!r}: {what} must be a compiled dispatcher "
                                f"(@nnjit.ops.dispatcher), got {fn!r}")
        if first_opcode is not None and (isinstance(first_opcode, bool)
                                         or not isinstance(first_opcode, int)
                                         or not 1 <= first_opcode <= MAX_OPCODE - len(specs)):
            raise ValueError(f"OpFamily {name!r}: first_opcode must be an int in "
                             f"[1, {MAX_OPCODE - len(specs)}], got {first_opcode!r}")
        self.name = name
        self.specs = specs
        self.forward = forward
        self.backward = backward
        self.core = bool(core)
        self.first_opcode = first_opcode
        self.load_job = load_job

    @property
    def block(self) -> range:
        """The family's opcodes ``[first_opcode, first_opcode + len(specs))``."""
        if self.first_opcode is None:
            raise RuntimeError(f"op family {self.name!r} has no opcodes before it is registered")
        return range(self.first_opcode, self.first_opcode + len(self.specs))

    def opcode(self, name: str) -> int:
        """The opcode of the op called ``name`` (``family.opcode("SILU")``)."""
        for k, spec in enumerate(self.specs):
            if spec.name == name:
                return self.block[k]
        raise KeyError(f"op family {self.name!r} has no op {name!r} "
                       f"(it has {', '.join(s.name for s in self.specs)})")

    def source_digest(self) -> str:
        """sha256 (hex) of every source file the family's compiled code reaches (see
        :func:`nnjit.kernels.source_reach.source_files`): it names the family's builds, so an
        edited kernel file means a new build instead of numba's stale cached one."""
        return _digest(self)

    def __repr__(self) -> str:
        block = "unregistered" if self.first_opcode is None else (
            f"opcodes {self.block.start}..{self.block.stop - 1}")
        return f"OpFamily({self.name!r}, {len(self.specs)} ops, {block})"


@functools.cache
def _digest(family: OpFamily) -> str:
    # contents only (reach_digest): the same family in another folder (a moved project, a
    # temporary directory) reuses its build
    return reach_digest(family.forward, family.backward, family.load_job)


class Registry:
    """Every registered family and op (:func:`register` fills it)."""

    def __init__(self, ops_table: dict | None = None):
        # the tape's table of recordable ops (a private one for a registry under test)
        self._ops = _tape.OPS if ops_table is None else ops_table
        self._families: list[OpFamily] = []
        self._by_opcode: dict[int, tuple[OpFamily, OpSpec]] = {}
        self._names: dict[str, int] = {}

    def families(self) -> tuple[OpFamily, ...]:
        """The registered families, in registration order."""
        return tuple(self._families)

    def spec(self, opcode: int) -> OpSpec:
        """The spec of ``opcode``; KeyError naming it when no family registered it."""
        return self._entry(opcode)[1]

    def family_of(self, opcode: int) -> OpFamily:
        """The family whose block holds ``opcode``."""
        return self._entry(opcode)[0]

    def opcode(self, name: str) -> int:
        """The opcode of the op called ``name`` (any family)."""
        if name not in self._names:
            raise KeyError(f"no registered op is called {name!r}")
        return self._names[name]

    def all_specs(self) -> dict[int, OpSpec]:
        """``{opcode: spec}`` of every registered op, in opcode order."""
        return {op: self._by_opcode[op][1] for op in sorted(self._by_opcode)}

    def _entry(self, opcode: int):
        entry = self._by_opcode.get(int(opcode))
        if entry is None:
            raise KeyError(f"opcode {int(opcode)} belongs to no registered op family")
        return entry

    def register(self, family: OpFamily) -> OpFamily:
        if not isinstance(family, OpFamily):
            raise TypeError(f"register: expected an OpFamily, got {type(family).__name__}")
        if family in self._families:
            return family
        if any(f.name == family.name for f in self._families):
            raise ValueError(f"register: an op family called {family.name!r} is already "
                             "registered")
        for spec in family.specs:
            if spec.name in self._names:
                raise ValueError(f"register: family {family.name!r}: an op called "
                                 f"{spec.name!r} is already registered")
        if family.first_opcode is None:
            first = USER_FIRST_OPCODE
            while any(op in self._by_opcode for op in range(first, first + len(family.specs))):
                first += USER_BLOCK * max(1, -(-len(family.specs) // USER_BLOCK))
            family.first_opcode = first
        taken = [op for op in family.block if op in self._by_opcode]
        if taken:
            other = self._by_opcode[taken[0]][0]
            raise ValueError(f"register: family {family.name!r} (opcodes {family.block.start}.."
                             f"{family.block.stop - 1}) overlaps family {other.name!r}")
        self._families.append(family)
        for op, spec in zip(family.block, family.specs):
            self._by_opcode[op] = (family, spec)
            self._names[spec.name] = op
            self._ops[op] = _tape.OpEntry(op, spec.name, spec.grad_inputs, family.name,
                                            spec.int_inputs)
            if self._ops is _tape.OPS:
                _tape.OPCODE_OF[spec.name] = op
        return family


registry = Registry()


def register(family: OpFamily) -> OpFamily:
    """Register ``family``: give it its opcode block (user families: the next free block of 100
    from 1000 up), check its blocks and op names clash with no other family, and let the tape
    record its ops. Returns the family (registering it again is a no-op)."""
    return registry.register(family)
