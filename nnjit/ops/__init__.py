"""Op families: the built-in ops and the public recipe for compiled user ops.

A family (:class:`OpFamily`) is one module holding its ops' :class:`OpSpec` s, kernels, recorders
and one compiled dispatcher per direction; :func:`register` gives it an opcode block. The core
families (``dense``, ``elementwise``, ``activations``, ``dropout``, ``losses``) are compiled into
every build; any other family, the graph ops' or yours, is compiled into a build only when a
traced model uses it.

The built-in family modules are imported by :mod:`nnjit.ops.opcodes`, not here, so that
``nnjit.ops`` itself stays importable from the engine below them.
"""

from nnjit.ops.context import (
    accumulates,
    aux_of,
    batch_rows,
    dispatcher,
    has_input,
    hyper_of,
    input_flat,
    input_grad_flat,
    input_grad_view,
    input_view,
    is_training,
    kernel,
    needs_grad,
    output_flat,
    output_grad_flat,
    output_grad_view,
    output_view,
    report_bad_input,
)
from nnjit.ops.family import OpFamily, register, registry
from nnjit.ops.spec import OpSpec, parse_signature

__all__ = [
    "OpFamily", "OpSpec", "register", "registry", "parse_signature", "kernel", "dispatcher",
    "accumulates", "aux_of", "batch_rows", "has_input", "hyper_of", "input_flat",
    "input_grad_flat", "input_grad_view", "input_view", "is_training", "needs_grad",
    "output_flat", "output_grad_flat", "output_grad_view", "output_view", "report_bad_input",
]
