"""numba intrinsics for raw memory and calls: pointers, a copy, uncounted arrays, calls by address.

numba counts references to every array and every view of one, atomically (tens of cycles each),
so a compiled loop that makes a view or calls a function per instruction spends more on counting
than on the instruction. ``borrow`` gives the loop arrays that are not counted, valid while their
owner lives; ``copy`` moves bytes between addresses in one ``memcpy``; ``caller`` calls a function
compiled apart (a ``cfunc``) through its address, so that it is neither compiled into the caller
nor passed to it as a Python object.
"""

from __future__ import annotations

import numba
from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic

_BYTES = ir.IntType(8).as_pointer()


@intrinsic
def pointer(typingctx, address):
    """The address (an integer) as a ``void*``."""
    sig = types.voidptr(types.intp)

    def codegen(context, builder, signature, args):
        return builder.inttoptr(args[0], _BYTES)
    return sig, codegen


@intrinsic
def copy(typingctx, destination, source, nbytes):
    """``memcpy`` between two addresses (which must not overlap)."""
    sig = types.void(types.intp, types.intp, types.intp)

    def codegen(context, builder, signature, args):
        dst, src = builder.inttoptr(args[0], _BYTES), builder.inttoptr(args[1], _BYTES)
        cgutils.raw_memcpy(builder, dst, src, args[2], 1)
    return sig, codegen


@numba.njit(cache=True, nogil=True, inline="always")   # one compile per array type otherwise
def borrow(a):
    """``a`` without reference counting: valid while the caller holds ``a``."""
    return numba.carray(pointer(a.ctypes.data), a.shape, a.dtype)


def caller(signature):
    """An intrinsic ``call(address, arguments)``: call the C function at ``address`` (a numba
    ``cfunc``'s ``.address``) with the tuple ``arguments``, of ``signature``. Compiled code calls
    functions compiled apart this way, without compiling them in or handing numba function
    objects (whose unboxing from Python costs tens of microseconds each)."""
    full = signature.return_type(types.intp, types.Tuple(signature.args))

    @intrinsic
    def call(typingctx, address, arguments):
        def codegen(context, builder, sig, args):
            function = ir.FunctionType(context.get_value_type(signature.return_type),
                                       [context.get_value_type(a) for a in signature.args])
            target = builder.inttoptr(args[0], function.as_pointer())
            values = [builder.extract_value(args[1], i) for i in range(len(signature.args))]
            return builder.call(target, values)
        return full, codegen
    return call
