"""Cluster kernels: the table of kernels the worker cores run, their arguments and cost model.

A kernel runs on all ``cluster_cores`` workers, which split its output and meet at a barrier.
Each row of ``KERNELS`` declares the kernel's arguments once (tensors in L1, integers, lists,
words); binding a program's ``cluster`` line checks names, types, dtypes and the output shape
against the TOSA shape rules and fails with file:line:column otherwise.

Semantics are the TOSA operators of ``hwsim.tosa_int`` (the kernel name says which; conv2d and
matmul run compiled, ``cluster_conv``, with those as their numpy twins). Kernels that
produce int32 (conv2d, depthwise_conv2d, matmul, add, sub, mul, maximum, minimum) optionally end
with a fused RESCALE: arguments ``mult`` (int32 per channel or one, int16 if ``scale32=0``),
``shift`` (int8), ``out_zp``, ``scale32``, ``rounding`` (``single``/``double``); the result is
then RESCALE(op(...)) with ``per_channel`` when ``mult`` has more than one entry.

Cost (``cost``: cycles on the ``cluster`` unit): convolutions, matrix products and pooling by
the shape-aware model of ``cluster_cost`` (SIMD lanes, split over the cores, per-output and
per-channel overheads, stride 2); the other kernels ``ceil(work / (cores * rate))`` where
``work`` is elements (elementwise, tables, rescale, reductions, softmax) or bytes (data
movement), ``rate`` the kernel's per-core parameter; plus the L1 bank conflicts of the cores'
streams (``tcdm.core_stalls``: each core walks its share of every tensor) and the contention
with the NE16 and DMA (``hwsim.timing.traffic``). The controller pays ``kernel_launch_cycles``
per launch and ``barrier_cycles`` per barrier. ``start`` computes a kernel when it starts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from hwsim.errors import TraceSyntaxError
from hwsim.isa.arguments import TensorRef
from hwsim.isa.gap9 import Kernel
from hwsim.targets.gap9 import cluster_conv, cluster_cost
from hwsim.targets.gap9.tcdm import core_stalls
from hwsim.targets.routines import (Arg, Bound, In, Out, Row, broadcast, fail, run_rescale,
                                    where)
from hwsim.targets.routines import bind as routine_bind
from hwsim.tosa_int import helpers as ti
from hwsim.tosa_int import operators as ops

INTS = ("i8", "i16", "i32")
RESCALE_ARGS = {"mult": In("i32", "i16", optional=True), "shift": In("i8", optional=True),
                "out_zp": Arg("int", 0), "scale32": Arg("int", 1),
                "rounding": Arg("word", "single", choices=("single", "double"))}


@dataclass(frozen=True)
class KernelDef(Row):
    """A cluster kernel: ``infer`` gives each output's (dtypes, shape)."""

    work: Callable      # (tensors, attrs) -> (rate parameter or None, work units or MACs)
    model: Callable | None = None   # (tensors, attrs, params) -> cycles (``cluster_cost``)


# -- shape rules ---------------------------------------------------------------------------------
def _out_requant(t, a, shape):
    """Output dtypes and shape of an int32 kernel with the optional fused RESCALE."""
    if "mult" in t:
        channels = shape[-1]
        for name in ("mult", "shift"):
            if name not in t or t[name].shape[-1] not in (1, channels):
                fail(f"fused rescale needs mult and shift with 1 or {channels} entries")
        if (t["mult"].dtype == "i32") != bool(a["scale32"]):
            fail("mult must be i32 with scale32=1 and i16 with scale32=0")
        return {"out": (INTS, shape)}
    return {"out": (("i32",), shape)}


def _conv_shape(t, a, depthwise=False):
    x, w = t["in"].shape, t["weight"].shape
    if len(x) != 4 or len(w) != 4:
        fail("conv: input NHWC and weight 4-D expected")
    kh, kw = (w[0], w[1]) if depthwise else (w[1], w[2])
    channels = w[2] if depthwise else w[3]
    if x[3] != channels:
        fail(f"conv: input has {x[3]} channels, weight expects {channels}")
    oh, ow, exact = ops.conv_out_hw(x[1:3], (kh, kw), a["pad"], a["stride"], a["dilation"])
    if not exact or oh < 1 or ow < 1:
        fail("conv: output size does not divide exactly (TOSA ERROR_IF)")
    oc = w[2] * w[3] if depthwise else w[0]
    if "bias" in t and t["bias"].shape[-1] not in (1, oc):
        fail(f"conv: bias needs 1 or {oc} entries")
    return _out_requant(t, a, (x[0], oh, ow, oc))


def _pool_shape(t, a):
    x = t["in"].shape
    if len(x) != 4 or len(a["kernel"]) != 2 or len(a["pad"]) != 4:
        fail("pool: NHWC input, kernel=KH,KW and pad=T,B,L,R expected")
    oh, ow, exact = ops.conv_out_hw(x[1:3], a["kernel"], a["pad"], a["stride"])
    if not exact or max(a["pad"][:2]) >= a["kernel"][0] or max(a["pad"][2:]) >= a["kernel"][1]:
        fail("pool: exact output size and padding below the kernel expected (TOSA ERROR_IF)")
    return {"out": ((t["in"].dtype,), (x[0], oh, ow, x[3]))}


def _binary_shape(t, a):
    if t["a"].dtype != t["b"].dtype:
        fail("elementwise: both inputs need the same dtype")
    return _out_requant(t, a, broadcast(t))


def _axis(t, a, name="in"):
    if not 0 <= a["axis"] < len(t[name].shape):
        fail(f"axis {a['axis']} outside rank {len(t[name].shape)}")
    return tuple(1 if i == a["axis"] else d for i, d in enumerate(t[name].shape))


def _same(dtypes=None):
    return lambda t, a: {"out": (dtypes or (t["in"].dtype,), t["in"].shape)}


def _rescale_shape(t, a):
    c = t["in"].shape[-1]
    if t["mult"].shape[-1] not in (1, c) or t["shift"].shape != t["mult"].shape:
        fail(f"rescale: mult and shift need 1 or {c} entries")
    if a["input_unsigned"] and a["output_unsigned"]:
        fail("rescale: input and output cannot both be unsigned (TOSA ERROR_IF)")
    if not a["scale32"] and a["rounding"] == "double":
        fail("rescale: double rounding needs scale32 (TOSA ERROR_IF)")
    for side, zp in (("input", a["in_zp"]), ("output", a["out_zp"])):
        dtype = t["in" if side == "input" else "out"].dtype
        unsigned = a[f"{side}_unsigned"]
        if dtype == "i32" and unsigned:
            fail(f"rescale: an i32 {side} cannot be unsigned (TOSA ERROR_IF)")
        allowed = (0, 32768) if dtype == "i16" and unsigned else None
        if dtype != "i8" and zp != 0 and (allowed is None or zp not in allowed):
            fail(f"rescale: {side} zero point {zp} not allowed for {dtype} (TOSA ERROR_IF)")
    return {"out": (INTS, t["in"].shape)}


def _table_shape(t, a):
    size = 256 if t["in"].dtype == "i8" else 513
    if t["table"].shape != (size,) or t["table"].dtype != t["in"].dtype:
        fail(f"table: {t['in'].dtype} input needs a {t['in'].dtype} table of {size} entries")
    return {"out": (("i8",) if t["in"].dtype == "i8" else ("i32",), t["in"].shape)}


def _transpose_shape(t, a):
    if sorted(a["perms"]) != list(range(len(t["in"].shape))):
        fail(f"transpose: perms {a['perms']} is not a permutation of the axes")
    return {"out": ((t["in"].dtype,), tuple(t["in"].shape[p] for p in a["perms"]))}


def _pad_shape(t, a):
    x = t["in"].shape
    if len(a["padding"]) != 2 * len(x) or min(a["padding"]) < 0:
        fail(f"pad: padding needs {2 * len(x)} non-negative entries")
    p = a["padding"]
    return {"out": ((t["in"].dtype,), tuple(d + p[2 * i] + p[2 * i + 1] for i, d in
                                            enumerate(x)))}


def _slice_shape(t, a):
    x = t["in"].shape
    if len(a["start"]) != len(x) or len(a["size"]) != len(x) or any(
            s < 0 or n < 1 or s + n > d for s, n, d in zip(a["start"], a["size"], x)):
        fail("slice: start and size must lie inside the input")
    return {"out": ((t["in"].dtype,), tuple(a["size"]))}


def _concat_shape(t, a):
    parts = [t[n] for n in ("in0", "in1", "in2", "in3") if n in t]
    ax = a["axis"]
    base = parts[0].shape
    if any(p.dtype != parts[0].dtype or len(p.shape) != len(base) or
           any(d != e for i, (d, e) in enumerate(zip(p.shape, base)) if i != ax) for p in parts):
        fail("concat: inputs must agree in dtype and in every axis but the concatenated one")
    shape = tuple(sum(p.shape[ax] for p in parts) if i == ax else d for i, d in enumerate(base))
    return {"out": ((parts[0].dtype,), shape)}


def _reshape_shape(t, a):
    return {"out": ((t["in"].dtype,), None)}     # any shape with the same element count


# -- semantics ----------------------------------------------------------------------------------
def _requant(values, x, a, t):
    if "mult" not in t:
        return values
    out = t["out"].dtype
    return ti.rescale(values, x["mult"], x["shift"], 0, a["out_zp"], out, bool(a["scale32"]),
                      a["rounding"] == "double")


def _run_conv(x, a, t, depthwise=False):
    fn = ops.depthwise_conv2d if depthwise else cluster_conv.conv2d
    acc = fn(x["in"], x["weight"], x.get("bias"), a["pad"], a["stride"], a["dilation"],
             a["in_zp"], a["weight_zp"])
    return {"out": _requant(acc, x, a, t)}


def _elements(t, a, name="out"):
    return math.prod(t[name].shape)


CONV_ARGS = {"in": In("i8"), "weight": In("i8"), "bias": In("i32", optional=True),
             "out": Out(*INTS), "pad": Arg("ints", (0, 0, 0, 0)), "stride": Arg("ints", (1, 1)),
             "dilation": Arg("ints", (1, 1)), "in_zp": Arg("int", 0), "weight_zp": Arg("int", 0),
             **RESCALE_ARGS}
POOL_ARGS = {"in": In("i8", "i16"), "out": Out("i8", "i16"), "kernel": Arg("ints"),
             "stride": Arg("ints", (1, 1)), "pad": Arg("ints", (0, 0, 0, 0))}
SHIFT_ARGS = {"a": In(*INTS), "b": In(*INTS), "out": Out(*INTS)}
BINARY_ARGS = {**SHIFT_ARGS, **RESCALE_ARGS}
UNARY = {"in": In(*INTS), "out": Out(*INTS)}


def _kernel(name, args, infer, run, rate, work=_elements):
    return KernelDef(name, args, infer, run, lambda t, a: (rate, work(t, a)))


def _modelled(name, args, infer, run, model, macs=lambda t, a: 0):
    """A kernel costed by ``cluster_cost`` (``model(tensors, attrs, params)``)."""
    return KernelDef(name, args, infer, run, lambda t, a: (None, macs(t, a)), model)


def _conv_model(t, a, p, depthwise=False):
    w = t["weight"].shape
    kernel = (w[0], w[1]) if depthwise else (w[1], w[2])
    return cluster_cost.conv_cycles(p, t["out"].shape, kernel, t["in"].shape[3], a["stride"],
                                    depthwise)


def _binary(name):
    def run(x, a, t):
        return {"out": _requant(ops.binary(name, x["a"], x["b"], a.get("mul_shift", 0)), x, a, t)}
    args = dict(BINARY_ARGS, **({"mul_shift": Arg("int", 0)} if name == "mul" else {}))
    return _kernel(name, args, _binary_shape, run, "eltwise_elements_per_cycle_per_core")


def _reduction(name):
    out = ("i32",) if name != "reduce_max" else INTS

    def infer(t, a):
        shape = _axis(t, a)
        if name == "argmax":
            shape = tuple(d for i, d in enumerate(t["in"].shape) if i != a["axis"])
        return {"out": (out, shape)}
    return _kernel(name, {**UNARY, "axis": Arg("int")}, infer,
                   lambda x, a, t: {"out": ops.reduce(name, x["in"], a["axis"])},
                   "reduce_elements_per_cycle_per_core", lambda t, a: _elements(t, a, "in"))


def _copy(name, args, infer, run):
    return _kernel(name, {"in": In(*INTS), "out": Out(*INTS), **args}, infer, run,
                   "copy_bytes_per_cycle_per_core", lambda t, a: t["out"].nbytes)


_TABLE_RATE = "table_elements_per_cycle_per_core"
KERNELS = {k.name: k for k in [
    _modelled("conv2d", CONV_ARGS, _conv_shape, _run_conv, _conv_model,
              lambda t, a: math.prod(t["out"].shape) * math.prod(t["weight"].shape[1:])),
    _modelled("depthwise_conv2d", CONV_ARGS, lambda t, a: _conv_shape(t, a, True),
              lambda x, a, t: _run_conv(x, a, t, True),
              lambda t, a, p: _conv_model(t, a, p, True),
              lambda t, a: math.prod(t["out"].shape) * t["weight"].shape[0] *
              t["weight"].shape[1]),
    _modelled("matmul", {"a": In("i8"), "b": In("i8"), "out": Out(*INTS), "a_zp": Arg("int", 0),
                         "b_zp": Arg("int", 0), **RESCALE_ARGS},
              lambda t, a: _out_requant(t, a, (t["a"].shape[0], t["a"].shape[1],
                                               t["b"].shape[2])),
              lambda x, a, t: {"out": _requant(cluster_conv.matmul(x["a"], x["b"], a["a_zp"],
                                                                   a["b_zp"]), x, a, t)},
              lambda t, a, p: cluster_cost.matmul_cycles(p, t["out"].shape, t["a"].shape[2]),
              lambda t, a: math.prod(t["out"].shape) * t["a"].shape[2]),
    _modelled("avg_pool2d", {**POOL_ARGS, "in_zp": Arg("int", 0), "out_zp": Arg("int", 0)},
              _pool_shape,
              lambda x, a, t: {"out": ops.avg_pool2d(x["in"], a["kernel"], a["pad"], a["stride"],
                                                     a["in_zp"], a["out_zp"], t["out"].dtype)},
              lambda t, a, p: cluster_cost.pool_cycles(p, t["out"].shape, a["kernel"])),
    _modelled("max_pool2d", POOL_ARGS, _pool_shape,
              lambda x, a, t: {"out": ops.max_pool2d(x["in"], a["kernel"], a["pad"], a["stride"],
                                                     t["in"].dtype)},
              lambda t, a, p: cluster_cost.pool_cycles(p, t["out"].shape, a["kernel"])),
    _binary("add"), _binary("sub"), _binary("mul"), _binary("maximum"), _binary("minimum"),
    _kernel("rescale", {**UNARY, "mult": In("i32", "i16"), "shift": In("i8"),
                        "in_zp": Arg("int", 0), "out_zp": Arg("int", 0), "scale32": Arg("int", 1),
                        "rounding": Arg("word", "single", choices=("single", "double")),
                        "input_unsigned": Arg("int", 0), "output_unsigned": Arg("int", 0)},
            _rescale_shape, run_rescale, "rescale_elements_per_cycle_per_core"),
    _kernel("table", {"in": In("i8", "i16"), "table": In("i8", "i16"), "out": Out("i8", "i32")},
            _table_shape,
            lambda x, a, t: {"out": ops.table(x["in"], x["table"], t["in"].dtype)}, _TABLE_RATE,
            lambda t, a: _elements(t, a) * (1 if t["in"].dtype == "i8" else 2)),
    _kernel("clamp", {**UNARY, "min": Arg("int"), "max": Arg("int")}, _same(),
            lambda x, a, t: {"out": np.clip(x["in"], a["min"], a["max"])},
            "eltwise_elements_per_cycle_per_core"),
    _kernel("clz", UNARY, _same(("i32",)), lambda x, a, t: {"out": ti.clz32(x["in"])},
            "eltwise_elements_per_cycle_per_core"),
    _kernel("arithmetic_right_shift", {**SHIFT_ARGS, "round": Arg("int", 0)},
            lambda t, a: {"out": ((t["a"].dtype,), broadcast(t))},
            lambda x, a, t: {"out": ti.arithmetic_right_shift(
                x["a"], x["b"], int(t["a"].dtype[1:]), bool(a["round"]))},
            "eltwise_elements_per_cycle_per_core"),
    _kernel("logical_left_shift", SHIFT_ARGS,
            lambda t, a: {"out": ((t["a"].dtype,), broadcast(t))},
            lambda x, a, t: {"out": ti.logical_left_shift(x["a"], x["b"],
                                                          int(t["a"].dtype[1:]))},
            "eltwise_elements_per_cycle_per_core"),
    _kernel("cast", UNARY, lambda t, a: {"out": (INTS, t["in"].shape)},
            lambda x, a, t: {"out": ti.wrap(x["in"], int(t["out"].dtype[1:]))},
            "eltwise_elements_per_cycle_per_core"),
    _reduction("reduce_sum"), _reduction("reduce_max"), _reduction("argmax"),
    _kernel("softmax", {"in": In("i8"), "out": Out("i8"), "t0": In("i16"), "t1": In("i16"),
                        "t2": In("i16"), "t3": In("i16"), "in_zp": Arg("int", 0),
                        "diff_mult": Arg("int"), "diff_shift": Arg("int"),
                        "out_zp": Arg("int", -128)},
            _same(),
            lambda x, a, t: {"out": ops.softmax(x["in"], [x[f"t{i}"] for i in range(4)],
                                                a["in_zp"], a["diff_mult"], a["diff_shift"],
                                                a["out_zp"])},
            "softmax_elements_per_cycle_per_core"),
    _copy("transpose", {"perms": Arg("ints")}, _transpose_shape,
          lambda x, a, t: {"out": ops.transpose(x["in"], a["perms"])}),
    _copy("pad", {"padding": Arg("ints"), "value": Arg("int", 0)}, _pad_shape,
          lambda x, a, t: {"out": ops.pad(x["in"], a["padding"], a["value"])}),
    _copy("slice", {"start": Arg("ints"), "size": Arg("ints")}, _slice_shape,
          lambda x, a, t: {"out": ops.slice_(x["in"], a["start"], a["size"])}),
    _copy("reshape", {}, _reshape_shape,
          lambda x, a, t: {"out": x["in"].reshape(t["out"].shape)}),
    _kernel("concat", {"in0": In(*INTS), "in1": In(*INTS), "in2": In(*INTS, optional=True),
                       "in3": In(*INTS, optional=True), "out": Out(*INTS), "axis": Arg("int")},
            _concat_shape,
            lambda x, a, t: {"out": np.concatenate([x[n] for n in ("in0", "in1", "in2", "in3")
                                                    if n in x], axis=a["axis"])},
            "copy_bytes_per_cycle_per_core", lambda t, a: t["out"].nbytes),
]}


# -- binding and execution ----------------------------------------------------------------------
def bind(instr: Kernel, spaces: dict) -> Bound:
    """Check a ``cluster`` line against its kernel's table row."""
    def l1(kernel, name, ref):
        if ref.space != "l1":
            raise TraceSyntaxError(where(instr, name), f"{kernel.name}: tensor {name} is in "
                                                       f"{ref.space}; cluster kernels work in l1")
        return spaces["l1"]

    bound, expected = routine_bind(instr, KERNELS, "cluster kernel", TensorRef, l1)
    tensors, kernel = bound.tensors, bound.row
    for name, (dtypes, shape) in expected.items():
        ref = tensors[name]
        if ref.dtype not in dtypes:
            raise TraceSyntaxError(where(instr, name), f"{kernel.name}: output {name}: expected "
                                                       f"dtype {' or '.join(dtypes)}, found "
                                                       f"{ref.dtype}")
        count = math.prod(ref.shape)
        if shape is None and count != math.prod(tensors["in"].shape) or \
                shape is not None and tuple(shape) != ref.shape:
            want = "x".join(map(str, shape)) if shape else f"{math.prod(tensors['in'].shape)} " \
                                                           "elements"
            raise TraceSyntaxError(where(instr, name), f"{kernel.name}: output {name}: expected "
                                                       f"shape {want}, found "
                                                       f"{'x'.join(map(str, ref.shape))}")
    return bound


def _read(space, ref: TensorRef) -> np.ndarray:
    raw = space.read(ref.addr, ref.nbytes)
    return raw.view(ti.STORAGE[ref.dtype]).astype(np.int64).reshape(ref.shape)


_CONFLICTS: dict = {}


def _bank_conflicts(bound: Bound, cores: int, cycles: int, t) -> int:
    """Stall cycles of the slowest core from ``tcdm.core_stalls``: each core walks 1/cores of
    every tensor, ``chunks`` bytes from the start of its share (of a tensor too small to
    ``split``, all cores walk the same bytes). The stalls depend on the addresses only modulo
    the banks' span: kernels repeating a pattern (a layer's tiles) share one simulation."""
    word, banks, window = t.l1_word_bytes, t.l1_banks, t.core_contention_window_cycles
    refs = list(bound.tensors.values())
    sizes = [ref.nbytes for ref in refs]
    chunks = tuple(max(word, n // cores) for n in sizes)
    split = tuple(n >= cores * word for n in sizes)
    iterations = max(1, max(c // word for c in chunks))
    gap = max(0, cycles // iterations - len(refs))
    key = (tuple(ref.addr % (banks * word) for ref in refs), chunks, split, cores, gap, banks,
           word, window)
    found = _CONFLICTS.get(key)
    if found is None:
        bases = np.array([ref.addr for ref in refs], np.int64)
        steps = np.array([max(word, (c // iterations) // word * word) for c in chunks],
                         np.int64)
        offsets = np.array([[c * k if parted else 0 for k in range(cores)]
                            for c, parted in zip(chunks, split)], np.int64)
        counts = np.full(cores, iterations, np.int64)
        found = int(core_stalls(bases, offsets, steps, counts, gap, banks, word, window).max())
        if len(_CONFLICTS) >= 4096:
            _CONFLICTS.clear()
        _CONFLICTS[key] = found
    return found


@dataclass(frozen=True)
class Cost:
    """What a kernel costs on the cluster: compute ``cycles`` (work over the cores' rate), the
    cores' L1 bank conflicts, the bytes and words the cores move, its MACs."""

    cycles: int
    conflicts: int
    nbytes: int
    words: float
    macs: int


def cost(bound: Bound, t) -> Cost:
    rate_name, work = bound.row.work(bound.tensors, bound.attrs)
    cores = t.cluster_cores
    if bound.row.model is not None:
        cycles, macs = max(1, bound.row.model(bound.tensors, bound.attrs, t)), work
    else:
        cycles, macs = max(1, math.ceil(work / (cores * getattr(t, rate_name)))), 0
    nbytes = sum(r.nbytes for r in bound.tensors.values())
    return Cost(cycles, _bank_conflicts(bound, cores, cycles, t), nbytes,
                nbytes / t.l1_word_bytes, macs)


def start(bound: Bound, l1):
    """Run ``bound`` now: read its inputs from L1 and compute; the returned commit stores its
    outputs (they land when the kernel ends)."""
    values = {n: _read(l1, r) for n, r in bound.tensors.items()
              if bound.row.args[n].kind == "in"}
    outputs = bound.row.run(values, bound.attrs, bound.tensors)

    def commit() -> None:
        for name, data in outputs.items():
            ref = bound.tensors[name]
            l1.store(ref.addr, ti.store(np.asarray(data).reshape(-1), ref.dtype))
    return commit if outputs else None
