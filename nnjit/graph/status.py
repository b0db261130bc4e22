"""Status codes returned by the compiled loop, and the messages Python turns them into."""

from __future__ import annotations

DONE = 0  # the task finished
PAUSED = 1  # an epoch chunk finished; Python may run callbacks, then call again to continue
YIELD_FORWARD = 2  # a Python op must run its forward; the returned index says which record
YIELD_BACKWARD = 3  # a Python op must run its backward
INTERRUPTED = 4  # a STOP_NOW request (a second Ctrl-C) abandoned the running epoch
NO_ROWS = 5  # the task has no rows to run (no job): Python's checks should have said so first
NONFINITE_TRAIN_LOSS = 10
NONFINITE_VAL_LOSS = 11

_NONFINITE = {
    NONFINITE_TRAIN_LOSS: "training loss",
    NONFINITE_VAL_LOSS: "validation loss",
}


class TrainingDivergedError(FloatingPointError):
    """The loss became NaN or infinite; the best weights seen so far were restored."""


def raise_for_status(status: int, op_index: int, epoch: int, program, restored: bool) -> None:
    """Raise the exception that ``status`` stands for (no-op for DONE/PAUSED/yields)."""
    if status in _NONFINITE:
        node = program.nodes[op_index] if 0 <= op_index < len(program.nodes) else None
        where = ""
        if node is not None:
            layer = node.owner or "<model>"
            where = (
                f"; non-finite values first appear in the output of op {op_index} "
                f"({node.opcode.name.lower()}) of layer '{layer}'"
            )
        tail = (
            "the best weights seen so far were restored"
            if restored
            else "no earlier weights were validated, so the weights are left as they were"
        )
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
    if status == NO_ROWS:
        raise ValueError("the data has no rows to run (0 samples, or a mask that selects no "
                         "node)")
    if status not in (DONE, PAUSED, YIELD_FORWARD, YIELD_BACKWARD):
        raise RuntimeError(f"compiled loop returned unknown status {status}")
