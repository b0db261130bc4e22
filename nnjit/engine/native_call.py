"""Calling a separately compiled numba function by its address, from compiled code.

The interpreter's dispatch table (:mod:`nnjit.engine.dispatch`) is an int64 array of function
addresses, not a tuple of dispatcher objects: numba types a tuple of dispatchers on every call
from Python (about 1.2 ms for a table, more than a whole Iris fit), an int64 array in
nanoseconds. :func:`caller` makes the intrinsic that calls such an address with numba's own
calling convention (what numba's first-class function calls do with a function's ``jit_addr``).

A wrong address or signature would crash the process, so every address travels with the key of
the signature it was compiled for (:func:`signature_key`), and the call site compares it with the
key of the argument types it passes: a mismatch returns ``(False, zero)`` instead of calling.
"""

from __future__ import annotations

import hashlib

from numba import types
from numba.core import cgutils
from numba.extending import intrinsic


def signature_key(return_type, arg_types) -> int:
    """A positive int63 naming ``return_type(arg_types...)`` (numba types)."""
    text = f"{return_type}({', '.join(str(t) for t in arg_types)})"
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little") >> 1


def address_of(dispatcher, signature) -> int:
    """The address of ``dispatcher``'s compiled ``signature`` in numba's calling convention.
    The dispatcher must stay alive as long as the address is used."""
    result = dispatcher.overloads[tuple(signature.args)]
    return int(result.library.get_pointer_to_function(result.fndesc.llvm_func_name))


def caller(return_type):
    """An intrinsic ``call(address, key, args) -> (called, result)`` that calls the function at
    ``address`` with the tuple ``args`` unpacked, when ``key`` is the key of
    ``return_type(types of args)``; else returns ``(False, zero)`` without calling."""

    @intrinsic
    def call(typingctx, address, key, args):
        if not isinstance(args, types.BaseTuple):
            return None
        arg_types = list(args.types)
        expected = signature_key(return_type, arg_types)
        signature = types.Tuple((types.boolean, return_type))(address, key, args)

        def codegen(context, builder, sig, llargs):
            address_v, key_v, args_v = llargs
            values = [builder.extract_value(args_v, k) for k in range(len(arg_types))]
            ok = builder.icmp_signed("==", key_v, context.get_constant(types.int64, expected))
            value_type = context.get_value_type(return_type)
            slot = cgutils.alloca_once_value(builder, cgutils.get_null_value(value_type))
            with builder.if_then(ok, likely=True):
                fn_type = context.call_conv.get_function_type(return_type, arg_types)
                pointer = builder.inttoptr(address_v, fn_type.as_pointer())
                status, result = context.call_conv.call_function(builder, pointer, return_type,
                                                                 arg_types, values)
                with cgutils.if_unlikely(builder, status.is_error):
                    context.call_conv.return_status_propagate(builder, status)
                builder.store(result, slot)
            return context.make_tuple(builder, sig.return_type, [ok, builder.load(slot)])

        return signature, codegen

    return call
