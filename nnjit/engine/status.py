"""Status codes returned by the compiled loop, and the messages Python turns them into."""

from __future__ import annotations

from nnjit.tape.records import R_OPCODE
from nnjit.tape.tape import OPS, op_name

DONE = 0  # the task finished
PAUSED = 1  # an epoch chunk finished; Python may run callbacks, then call again to continue
YIELD_FORWARD = 2  # a Python op must run its forward; the returned index says which record
YIELD_BACKWARD = 3  # a Python op must run its backward
INTERRUPTED = 4  # a STOP_NOW request (a second Ctrl-C) abandoned the running epoch
NO_ROWS = 5  # the task has no rows to run (no job): Python's checks should have said so first
UNKNOWN_OPCODE = 6  # no dispatch branch of the build handles the returned record's opcode
# (7: an unknown optimizer kind, until each optimizer became a dispatch table entry)
BAD_INPUT = 8  # the returned record's op found bad input data (an index out of range)
BAD_TABLE = 9  # a dispatch table entry (returned: its column) has another signature than its call
NONFINITE_TRAIN_LOSS = 10
NONFINITE_VAL_LOSS = 11

_NONFINITE = {
    NONFINITE_TRAIN_LOSS: "training loss",
    NONFINITE_VAL_LOSS: "validation loss",
}


class TrainingDivergedError(FloatingPointError):
    """The loss became NaN or infinite; the best weights seen so far were restored."""


class UnknownOpcodeError(RuntimeError):
    """A record's opcode has no branch in the compiled loop's dispatch: the run stopped there."""


class BadInputError(IndexError):
    """An op found bad input data (an embedding index out of range): the task stopped after
    that batch's forward pass, before any weight changed. The message names the layer, the bad
    value and the valid range."""


def _bad_input_message(op_index: int, program) -> str:
    """The layer of record ``op_index`` and what its op's spec says was wrong with its input."""
    from nnjit.ops.family import registry  # (the engine sits below the op families)

    node = program.nodes[op_index] if 0 <= op_index < len(program.nodes) else None
    if node is None:
        return f"the compiled loop reported bad input at record {op_index}, which does not exist"
    layer = node.owner or "<model>"
    try:
        spec = registry.spec(node.opcode)
    except KeyError:
        spec = None
    if spec is None or spec.bad_input is None:
        what = f"{op_name(node.opcode)} found bad input data"
    else:
        what = spec.bad_input(program, op_index)
    return f"layer '{layer}': {what}"


def _unknown_opcode_message(op_index: int, program) -> str:
    """Name the record's op (from the registry, or its bare number) and the layer that owns it."""
    records = program.records
    if not 0 <= op_index < len(records):
        return f"the compiled loop stopped at record {op_index}, which does not exist"
    code = int(records[op_index, R_OPCODE])
    if code in OPS:
        name = f"{op_name(code)} (opcode {code})"
    else:
        name = (f"opcode {code}, which is not in nnjit.ops.opcodes.Opcode nor in any "
                "registered op family")
    node = program.nodes[op_index] if op_index < len(program.nodes) else None
    layer = (node.owner or "<model>") if node is not None else "<unknown>"
    return (f"op {op_index} of layer '{layer}' is {name}: no branch of the compiled loop "
            "handles it, so the run stopped there (a new op needs its branch in its family's "
            "dispatcher)")


def raise_for_status(status: int, op_index: int, epoch: int, program, restored: bool) -> None:
    """Raise the exception that ``status`` stands for (no-op for DONE/PAUSED/yields)."""
    if status in _NONFINITE:
        node = program.nodes[op_index] if 0 <= op_index < len(program.nodes) else None
        where = ""
        if node is not None:
            layer = node.owner or "<model>"
            where = (
                f"; non-finite values first appear in the output of op {op_index} "
                f"({op_name(node.opcode)}) of layer '{layer}'"
            )
        if restored:
            tail = "the best weights seen so far were restored"
        elif status == NONFINITE_TRAIN_LOSS:  # (found in a batch's forward, before its step)
            tail = (f"no weights were validated before, so the model keeps the weights its "
                    f"last step of epoch {epoch + 1} left (trained, not the initial ones; pass "
                    f"validation data to have the best validated weights restored)")
        else:
            tail = (f"no earlier weights were validated, so the model keeps the weights of the "
                    f"end of epoch {epoch + 1}'s training")
        raise TrainingDivergedError(
            f"{_NONFINITE[status]} became NaN or infinite at epoch {epoch + 1}{where}; {tail}. "
            "Try a lower learning rate, standardised inputs or gradient clipping."
        )
    if status == INTERRUPTED:
        raise KeyboardInterrupt(
            f"fit: interrupted again during epoch {epoch + 1}: that epoch was abandoned; the "
            "history of the completed epochs is kept and the best weights were restored"
            if restored else f"fit: interrupted again during epoch {epoch + 1}: that epoch was "
            "abandoned; the history of the completed epochs is kept")
    if status == UNKNOWN_OPCODE:
        raise UnknownOpcodeError(_unknown_opcode_message(op_index, program))
    if status == BAD_TABLE:
        raise RuntimeError(f"the compiled loop's dispatch table entry in column {op_index} was "
                           "compiled for other argument types than the loop passes "
                           "(nnjit.engine.dispatch): nothing was called")
    if status == BAD_INPUT:
        raise BadInputError(_bad_input_message(op_index, program))
    if status == NO_ROWS:
        raise ValueError("the data has no rows to run (0 samples, or a mask that selects no "
                         "node)")
    if status not in (DONE, PAUSED, YIELD_FORWARD, YIELD_BACKWARD):
        raise RuntimeError(f"compiled loop returned unknown status {status}")
