"""The host's IEEE-754 binary32 arithmetic, for kernels that prove when it equals a model's.

numba has no scalar bit casts between floats and integers of the same width, no fused
multiply-add, and widens 32-bit integer arithmetic to 64 bits; these intrinsics lower to single
LLVM instructions (``bitcast``, ``llvm.fma.f32``, 32-bit ``add``/``mul``/...), so loops using
them vectorise fully. ``fma32(a, b, c)`` is ``a * b + c`` rounded once to nearest-even, as IEEE
754 defines fusedMultiplyAdd (an FMA instruction on x86-64 with FMA3 and on AArch64; otherwise
LLVM calls the C library's ``fmaf``, which is exact too).

They assume the default floating-point environment: round to nearest-even, no flush-to-zero of
denormals (x86 MXCSR.FTZ/DAZ clear). ``host_is_ieee()`` checks that at run time.

numba only: they cannot be called from plain Python.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba.core import types
from numba.extending import intrinsic

from hwsim.targets.floats import jit

_F32 = ir.FloatType()


@intrinsic
def fma32(typingctx, a, b, c):
    """float32 ``a * b + c`` with one rounding to nearest-even."""
    sig = types.float32(types.float32, types.float32, types.float32)

    def codegen(context, builder, signature, args):
        fn = builder.module.declare_intrinsic("llvm.fma", [_F32],
                                              ir.FunctionType(_F32, [_F32, _F32, _F32]))
        return builder.call(fn, args)
    return sig, codegen


@intrinsic
def f32(typingctx, bits):
    """The float32 whose bit pattern is the uint32 ``bits``."""
    sig = types.float32(types.uint32)

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], _F32)
    return sig, codegen


@intrinsic
def bits32(typingctx, x):
    """The bit pattern (uint32) of the float32 ``x``."""
    sig = types.uint32(types.float32)

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.IntType(32))
    return sig, codegen


@intrinsic
def f64(typingctx, bits):
    """The float64 whose bit pattern is the uint64 ``bits``."""
    sig = types.float64(types.uint64)

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.DoubleType())
    return sig, codegen


@intrinsic
def bits64(typingctx, x):
    """The bit pattern (uint64) of the float64 ``x``."""
    sig = types.uint64(types.float64)

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.IntType(64))
    return sig, codegen


@jit
def _probe(values):
    # values = [2**-126, 0.5, 0]: a denormal product and a denormal addend, read from memory so
    # that nothing is folded at compile time
    x, half, zero = np.float32(values[0]), np.float32(values[1]), np.float32(values[2])
    tiny = fma32(x, half, zero)                  # 2**-127: denormal, lost under FTZ
    back = fma32(tiny, np.float32(2.0), zero)    # 2**-126 again, unless DAZ read tiny as 0
    return bits32(tiny) == np.uint32(0x00400000) and bits32(back) == np.uint32(0x00800000)


_PROBE = np.array([2.0 ** -126, 0.5, 0.0], np.float32)


def host_is_ieee() -> bool:
    """Whether this thread's float32 arithmetic keeps denormals (no FTZ/DAZ), as kernels using
    these intrinsics assume."""
    return bool(_probe(_PROBE))


def _uint32_op(name: str, doc: str):
    @intrinsic
    def op(typingctx, a, b):
        sig = types.uint32(types.uint32, types.uint32)

        def codegen(context, builder, signature, args):
            return getattr(builder, name)(args[0], args[1])
        return sig, codegen
    op.__doc__ = doc
    return op


# uint32 arithmetic that stays 32-bit (numba widens uint32 operands to int64, which halves the
# lanes of a vectorised loop, or scalarises it: x86 has no vector 64-bit multiply): wrapping add,
# subtract and multiply (two's complement, so for int32 bits too), and, shifts
add32 = _uint32_op("add", "a + b modulo 2**32")
sub32 = _uint32_op("sub", "a - b modulo 2**32")
mul32 = _uint32_op("mul", "a * b modulo 2**32")
shl32 = _uint32_op("shl", "a << b")
and32 = _uint32_op("and_", "a & b")
xor32 = _uint32_op("xor", "a ^ b")
shr32 = _uint32_op("lshr", "a >> b (logical)")
