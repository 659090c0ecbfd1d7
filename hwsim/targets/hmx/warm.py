"""A cold start's share of the HMX kernels for the run's own process.

On a cold numba cache a child process compiles HMX's kernels by running the synthetic DS-CNN
(``hwsim.schedule.warm``) while the run compiles the timing core. The child's half is the longer
(the multiply chain alone takes about 5 s), so the run, once its own half is done, takes kernels
off the child's list before it replays (``hwsim.timing.warm.wait``), each by a call on tiny
operands of the types the machine passes (``hvx.py``, ``semantics.py``,
``datapath.write_convert``): numba compiles the very signature the run uses and writes it to the
disk cache, where the child finds it. Until the child has finished, the run takes:

1. the convert kernel the child calls right after the multiply chain, which it reaches a second
   or so after the run is done with its own half: ``convert_usual``, or in ``fp16`` mode its
   exact path ``convert_rest`` (a float graph's convert leaves a cell or two of some layers to
   it, an input bias that nearly cancels the accumulator, the DS-CNN's and real models' alike;
   in ``dequantise`` mode neither calls it). Taking both would collide with the child;
2. the end of the child's list, backwards (the output cast, then softmax's, pooling's and the
   activations' kernels), until the child has reached one first: numba then loads it from the
   cache, and everything before it on the list is the child's too. So no kernel is compiled in
   both processes but the one they may be compiling when they meet;
3. the kernels that real models often need and the DS-CNN never calls (``_extras``): the exact
   path of the HVX add in ``dequantise`` mode (KWS and resnet8_int8 need it), the clamp in
   ``fp16`` mode (where the convert applies the DS-CNN's ReLUs), then what the scheduler adds
   (the check's compiled passes: the child runs no check).
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from hwsim.targets.hmx import datapath, hvx_kernels as K, layouts, numerics as N

_FP16 = np.full(4, 0x3C00, np.uint16)     # 1.0


def _calls(mode: str) -> list[tuple[object, Callable[[], None]]]:
    """(kernel, a call that compiles it) of steps 1 and 2 in ``mode``."""
    out = np.empty(4, np.uint16)
    cube = np.full((1, 2, 2), 0x3C00, np.uint16)
    first = [(N.convert_rest if mode == "fp16" else N.convert_usual, lambda: _convert(mode))]
    clamp = [] if mode == "fp16" else [_clamp()]
    return first + [
        (K._reformat, lambda: K.f16_to_f32(_FP16, np.empty(4, np.uint32))),
        (K.fp16_recip, lambda: K.fp16_recip(_FP16, out)),
        (K.fp16_reduce_sum, lambda: K.fp16_reduce_sum(cube, np.empty((1, 2), np.uint16))),
        (K.fp16_exp, lambda: K.fp16_exp(_FP16, out)),
        (K._binary_usual, lambda: K.fp16_binary(_FP16, _FP16, out, False)),
        (K.fp16_reduce_max, lambda: K.fp16_reduce_max(cube, np.empty((1, 2), np.uint16))),
        (K.fp16_avg_pool, lambda: K.fp16_avg_pool(cube, np.empty((1, 1, 2), np.uint16),
                                                  2, 2, 1, 1, 0, 0)),
        *clamp,
        (K.unpack_act, lambda: K.unpack_act(np.zeros(1024, np.uint16), 0, 1, 1, 1,
                                            layouts.spatial_grid(0), out[:1])),
        (datapath.crouton_of_cvt, lambda: datapath.crouton_of_cvt(     # as write_convert
            np.zeros((datapath.CELLS, datapath.CELLS), np.uint32), np.empty(1024, np.uint16))),
    ]


def _extras(mode: str) -> list[tuple[object, Callable[[], None]]]:
    """(kernel, a call that compiles it) of those the child does not call in ``mode``."""
    if mode == "fp16":
        return [_clamp()]
    return [(K._binary_rest, lambda: K._binary_rest(_FP16, _FP16, np.empty(4, np.uint16),
                                                    False, np.zeros(4, np.bool_)))]


def _clamp() -> tuple[object, Callable[[], None]]:
    return K.fp16_clamp, lambda: K.fp16_clamp(_FP16, np.empty(4, np.uint16), 0x0000, 0x7C00)


def _convert(mode: str) -> None:
    """The convert kernel of ``_calls(mode)``, on the arrays ``semantics._convert`` passes (no
    cell pending for ``convert_rest``; zeros, all usual, for ``convert_usual``)."""
    cells, fields = (datapath.CELLS, datapath.CELLS), np.zeros(datapath.CELLS, np.int64)
    acc, pending = np.zeros(cells, np.uint64), np.zeros(cells, np.bool_)
    prev, out = np.zeros(cells, np.uint32), np.zeros(cells, np.uint32)
    operands = (acc, fields, fields, fields, fields, prev, out, N.shape_table("abs"))
    if mode == "fp16":
        N.convert_rest(*operands, 0, 0, 0, 0, 0, 0, 7, 29, pending)
    else:
        N.convert_usual(*operands, 0, 0, 0, 0, 7, 29, pending)


def share(mode: str, also=()) -> Callable[[Callable[[], bool]], list[str]]:
    """This process's share in ``mode`` (``hwsim.timing.warm.start``), then ``also``."""
    return lambda done: compile_late(mode, done, also)


def compile_late(mode: str, done: Callable[[], bool], also=()) -> list[str]:
    """Until ``done()`` (the child has finished): compile the kernels of the child's list in
    ``mode`` from its end until the child turns out to have compiled one already, then those it
    does not call, then ``also`` ((kernel, call) pairs of the caller's: the scheduler's check
    passes); the names of those this process compiled."""
    compiled = []
    for kernel, call in _calls(mode):
        if done():
            return compiled
        if not _compiled(kernel, call):
            break
        compiled.append(kernel.__name__)
    for kernel, call in [*_extras(mode), *also]:
        if done():
            break
        if _compiled(kernel, call):
            compiled.append(kernel.__name__)
    return compiled


def _compiled(kernel, call: Callable[[], None]) -> bool:
    """Make the call; whether numba compiled ``kernel`` for it rather than load it."""
    loaded = sum(kernel.stats.cache_hits.values())
    call()
    return sum(kernel.stats.cache_hits.values()) == loaded
