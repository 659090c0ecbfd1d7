"""TOSA 0.80 graphs in and out: flatbuffers and MLIR text, the upgrade to 1.0 and back.

Oracles: numpy implementations of the 0.80 pseudocode (TOSA 0.80.0, docs/sources.md) for the
operators whose form changes, a real 0.80 file (``kws_int8_v080.tosa``, written by the public
serialization library at v0.80.0), and real 0.80 MLIR (``tests/data/tosa080``, written by
TensorFlow 2.16's TFLite legalisation) checked against the current 1.0 converter.
"""

import json
from pathlib import Path

import numpy as np
import pytest

from hwsim.cli import main
from hwsim.errors import TosaError
from hwsim.tosa import load_graph
from hwsim.tosa.builder import GraphBuilder
from hwsim.tosa.fbtable import read_table, write_table
from hwsim.tosa.loaders import graph_bytes
from hwsim.tosa.reference import run_graph
from hwsim.tosa.v080.downgrade import downgrade
from hwsim.tosa.v080.flatbuf import read_080, write_080
from hwsim.tosa.v080.form import Graph080, Op080, Tensor080
from hwsim.tosa.v080.mlir import parse_080
from hwsim.tosa.v080.mlir_print import print_080
from hwsim.tosa.v080.schema import schema

from tests.models import model

DATA = Path(__file__).parent / "data" / "tosa080"


def graph080(ops, tensors, inputs, outputs) -> Graph080:
    return Graph080({t.name: t for t in tensors}, ops, inputs, outputs)


def load080(g: Graph080, batch: int = 1):
    """The 1.0 graph of a 0.80 form, through a written 0.80 flatbuffer."""
    return load_graph(write_080(g), batch=batch)


def const(name, kind, values):
    values = np.asarray(values)
    return Tensor080(name, list(values.shape), kind, values)


def run1(graph, *inputs):
    return next(iter(run_graph(graph, list(inputs)).values()))


# -- numpy oracles: the 0.80 pseudocode ------------------------------------------------------

def apply_scale_32(value, multiplier, shift, double_round):
    value, multiplier, shift = (np.asarray(v, np.int64) for v in (value, multiplier, shift))
    round_ = np.left_shift(np.int64(1), shift - 1)
    if double_round:
        round_ = np.where((shift > 31) & (value >= 0), round_ + (1 << 30), round_)
        round_ = np.where((shift > 31) & (value < 0), round_ - (1 << 30), round_)
    return (value * multiplier + round_) >> shift


# -- the real 0.80 flatbuffer ------------------------------------------------------------------

def test_real_080_flatbuffer_reads_as_its_tflite_model():
    old, new = load_graph(model("kws_int8_v080.tosa")), load_graph(model("kws_ref_model.tflite"))
    assert old.version == "0.80.0" and new.version == "1.0"
    assert [(op.op, op.name, op.attrs) for op in old] == [(op.op, op.name, op.attrs)
                                                          for op in new]
    for a, b in zip(old, new):
        for ta, tb in zip(a.inputs, b.inputs):
            assert (ta.shape, ta.dtype) == (tb.shape, tb.dtype)
            assert ta.is_const == tb.is_const
            if ta.is_const:
                assert np.array_equal(ta.data, tb.data), (a, ta, tb)
    x = np.load(model("kws_sample_input.npy"))
    assert run1(old, x).tolist() == run1(new, x).tolist()


def test_080_flatbuffer_codec_round_trip_is_exact():
    data = model("kws_int8_v080.tosa").read_bytes()
    first = read_table(schema(), data, "TosaGraph")
    again = read_table(schema(), write_080(read_080(data, "kws")), "TosaGraph")
    assert again["version"] == first["version"] == {"_major": 0, "_minor": 80, "_patch": 0,
                                                    "_draft": False}
    a, b = first["regions"][0]["blocks"][0], again["regions"][0]["blocks"][0]
    assert [(o["op"], o["inputs"], o["outputs"]) for o in a["operators"]] == \
        [(o["op"], o["inputs"], o["outputs"]) for o in b["operators"]]
    for x, y in zip(a["operators"], b["operators"]):
        assert (x["attribute"] is None) == (y["attribute"] is None)
        if x["attribute"]:
            assert x["attribute"][0] == y["attribute"][0]
            for key, value in x["attribute"][1].items():
                assert np.array_equal(value, y["attribute"][1][key]), (x, key)
    assert [(t["name"], list(t["shape"]), t["type"], t["data"]) for t in a["tensors"]] == \
        [(t["name"], list(t["shape"]), t["type"], t["data"]) for t in b["tensors"]]


def _small080(patch=0) -> bytes:
    x = Tensor080("x", [1, 4], "INT8")
    y = Tensor080("y", [1, 4], "INT32")
    g = graph080([Op080("RESCALE", ["x"], ["y"], dict(
        input_zp=3, output_zp=0, multiplier=[1 << 30], shift=[30], scale32=True,
        double_round=False, per_channel=False, input_unsigned=False, output_unsigned=False))],
        [x, y], ["x"], ["y"])
    g.version = (0, 80, patch)
    return write_080(g)


def test_version_is_recognised_from_the_content():
    data = _small080()
    assert load_graph(data).version == "0.80.0"
    assert run1(load_graph(data), np.array([[3, 4, -128, 127]], np.int8)).tolist() == \
        [[0, 1, -131, 124]]
    root = read_table(schema(), data, "TosaGraph")

    def stamped(minor, patch):
        root["version"].update(_minor=minor, _patch=patch)
        return write_table(schema(), "TosaGraph", root, b"TOSA")
    assert load_graph(stamped(80, 1)).version == "0.80.1"        # any 0.80 patch level
    with pytest.raises(TosaError, match=r"TOSA version 0\.60\.1; hwsim reads 0\.80\.x and 1\.x"):
        load_graph(stamped(60, 1))


# -- real 0.80 MLIR text (TensorFlow 2.16) ---------------------------------------------------

@pytest.mark.parametrize("tf", ["2.15", "2.16"])       # LLVM 17 and LLVM 18 spellings
def test_tensorflow_080_mlir_matches_the_current_converter(tf):
    old = load_graph(DATA / f"small_int8_tf{tf}.mlir")
    new = load_graph(DATA / f"small_int8_tf{tf}.tflite")
    assert old.version == "0.80" and old.inputs[0].shape == (1, 12, 12, 3)
    assert load_graph(DATA / f"small_int8_tf{tf}.mlir", batch=3).outputs[0].shape == (3, 10)
    ops = [op.op for op in old]
    assert "FULLY_CONNECTED" not in ops and ops[-4:] == ["RESHAPE", "CONV2D", "RESHAPE",
                                                         "RESCALE"]
    pad = next(op for op in old if op.op == "PAD")
    assert pad.const("padding").tolist() == [0, 0, 1, 0, 0, 1, 0, 0]
    assert next(op for op in old if op.op == "TRANSPOSE").perms == [0, 2, 1, 3]
    rng = np.random.default_rng(0)
    for _ in range(8):
        x = rng.integers(-128, 128, (1, 12, 12, 3)).astype(np.int8)
        assert np.array_equal(run1(old, x), run1(new, x))


def test_mlir_llvm17_generic_form_and_types():
    text = """
module attributes {tfl.schema_version = 3 : i32} {
  func.func @main(%arg0: tensor<1x4x!quant.uniform<u8:f32, 0.5:128>>) -> tensor<1x4xi32> {
    %0 = "tosa.rescale"(%arg0) {double_round = false, input_zp = 128 : i32,
          multiplier = array<i32: 1073741824>, output_zp = -1 : i32, per_channel = false,
          scale32 = true, shift = array<i32: 30>} : (tensor<1x4xui8>) -> tensor<1x4xi8>
    %1 = "tosa.const"() {value = dense<[[1, 2, 3, 4]]> : tensor<1x4xi8>} : () -> tensor<1x4xi8>
    %2 = "tosa.mul"(%0, %1) {shift = 0 : i32} : (tensor<1x4xi8>, tensor<1x4xi8>)
          -> tensor<1x4xi32> loc(#loc3)
    return %2 : tensor<1x4xi32>
  }
}
#loc3 = loc("top")
"""
    g = load_graph(text.encode())
    rescale, mul = g.operators
    assert (rescale.input_unsigned, rescale.scalar("input_zp")) == (True, -128)
    assert (mul.name, mul.scalar("shift"), g.outputs[0].name) == ("top", 0, "top")
    raw = np.array([[0, 127, 128, 255]], np.uint8)       # (u - 128) - 1, saturated, times k
    assert run1(g, raw.view(np.int8)).tolist() == [[-128, -4, -3, 504]]


# -- operators whose form changes --------------------------------------------------------------

def _fc080(in_kind="INT8", w_kind="INT8", izp=-3, wzp=5, n=2, ic=6, oc=4, seed=1):
    rng = np.random.default_rng(seed)
    w = rng.integers(-8, 8, (oc, ic)).astype(np.int8)
    bias = rng.integers(-100, 100, oc).astype(np.int32)
    out = "INT48" if in_kind == "INT16" else "INT32"
    g = graph080([Op080("FULLY_CONNECTED", ["x", "w", "b"], ["y"],
                        {"input_zp": izp, "weight_zp": wzp})],
                 [Tensor080("x", [n, ic], in_kind), const("w", w_kind, w), const("b", out, bias),
                  Tensor080("y", [n, oc], out)], ["x"], ["y"])
    return g, w, bias


def test_fully_connected_becomes_a_1x1_conv2d_with_080_meaning():
    g, w, bias = _fc080()
    new = load080(g)
    assert [op.op for op in new] == ["RESHAPE", "CONV2D", "RESHAPE"]
    conv = new.operators[1]
    assert conv.weight.shape == (4, 1, 1, 6) and conv.acc_type == "int32"
    assert (conv.scalar("input_zp"), conv.scalar("weight_zp")) == (-3, 5)
    x = np.random.default_rng(2).integers(-128, 128, (2, 6)).astype(np.int8)
    want = (x.astype(np.int64) + 3) @ (w.astype(np.int64) - 5).T + bias    # S1 2.3.7
    assert np.array_equal(run1(new, x), want)


@pytest.mark.parametrize("kinds, message", [
    (("INT8", "INT4", -3, 5), r"FULLY_CONNECTED\[y\]: ERROR_IF\(weight_t != i8_t && "
                              r"weight_zp != 0\) with weight_zp = 5 \(TOSA 0.80\)"),
    (("INT16", "INT8", 2, 0), r"FULLY_CONNECTED\[y\]: ERROR_IF\(in_t != i8_t && input_zp != 0\)"),
    (("INT8", "INT8", 0, 300), r"FULLY_CONNECTED\[y\]: weight_zp = 300 does not fit int8"),
])
def test_fully_connected_zero_points_outside_080_are_one_line_errors(kinds, message):
    g, _, _ = _fc080(*kinds)
    with pytest.raises(TosaError, match=message) as err:
        load080(g)
    assert "\n" not in str(err.value) and str(err.value).startswith("<bytes>: ")


def _rescale080(in_kind, out_kind, **attrs):
    a = dict(input_zp=0, output_zp=0, multiplier=[1 << 30], shift=[30], scale32=True,
             double_round=False, per_channel=False, input_unsigned=False,
             output_unsigned=False)
    a.update(attrs)
    shape = [1, 3, len(a["multiplier"])] if a["per_channel"] else [1, 3, 2]
    return graph080([Op080("RESCALE", ["x"], ["y"], a)],
                    [Tensor080("x", shape, in_kind), Tensor080("y", shape, out_kind)],
                    ["x"], ["y"])


def test_rescale_double_round_and_per_channel_match_080():
    mult, shift = [1278221421, 1359514674], [38, 40]
    new = load080(_rescale080("INT32", "INT8", input_zp=0, output_zp=14, multiplier=mult,
                              shift=shift, double_round=True, per_channel=True))
    op = new.operators[0]
    assert (op.rounding_mode, op.const("multiplier").dtype, op.const("shift").dtype) == \
        ("DOUBLE_ROUND", np.int32, np.int8)
    x = np.random.default_rng(3).integers(-(1 << 20), 1 << 20, (1, 3, 2)).astype(np.int32)
    want = np.clip(apply_scale_32(x, mult, shift, True) + 14, -128, 127)
    assert np.array_equal(run1(new, x), want)
    single = load080(_rescale080("INT32", "INT8", multiplier=mult, shift=shift,
                                 per_channel=True))
    assert single.operators[0].rounding_mode == "SINGLE_ROUND"


def test_uint8_tensors_become_unsigned_rescales():
    g = _rescale080("UINT8", "INT8", input_zp=200, output_zp=-5)
    new = load080(g)
    op = new.operators[0]
    assert new.inputs[0].dtype.name == "int8" and op.input_unsigned and not op.output_unsigned
    assert op.scalar("input_zp") == 200 - 256
    raw = np.array([[[0, 255], [200, 201], [100, 77]]], np.uint8)
    want = np.clip(raw.astype(np.int64) - 200 - 5, -128, 127)
    assert np.array_equal(run1(new, raw.view(np.int8)), want)
    again = downgrade(new).ops[0].attrs
    assert (again["input_zp"], again["input_unsigned"]) == (200, True)


@pytest.mark.parametrize("attrs, kinds", [
    ({"input_unsigned": True, "output_unsigned": True}, ("INT8", "INT8")),
    ({"input_unsigned": True}, ("INT8", "INT32")),
    ({"output_unsigned": True}, ("INT32", "INT8")),
    ({"input_unsigned": True}, ("INT32", "INT16")),
    ({"output_unsigned": True}, ("INT8", "INT32")),
])
def test_rescales_1_0_forbids_have_no_form(attrs, kinds):
    with pytest.raises(TosaError, match=r"RESCALE\[y\]: TOSA 0.80 allows .*_unsigned.*; 1.0 "
                                        r"forbids it \(no faithful 1.0 form\)$"):
        load080(_rescale080(*kinds, **attrs))


def _shift080(op, kind, shift_data=None):
    shift = const("s", kind, shift_data) if shift_data is not None else \
        Tensor080("s", [1, 32], kind)
    inputs = ["x"] if shift_data is not None else ["x", "s"]
    return graph080([Op080(op, ["x", "s"], ["y"])],
                    [Tensor080("x", [1, 32], kind), shift, Tensor080("y", [1, 32], kind)],
                    inputs, ["y"])


@pytest.mark.parametrize("op", ["LOGICAL_LEFT_SHIFT", "LOGICAL_RIGHT_SHIFT"])
@pytest.mark.parametrize("kind, bits", [("INT8", 8), ("INT16", 16)])
def test_logical_shifts_keep_the_080_shift_range(op, kind, bits):
    """0.80 shifts int8/int16 by 0..31 (S1 2.5.8-9); 1.0 only below the width: a variable
    shift runs in int32 and gives the 0.80 bits."""
    new = load080(_shift080(op, kind))
    assert [o.op for o in new][-2:] == [op, "CAST"]
    rng = np.random.default_rng(bits)
    np_type = {8: np.int8, 16: np.int16}[bits]
    x = rng.integers(-(1 << (bits - 1)), 1 << (bits - 1), (1, 32)).astype(np_type)
    s = np.arange(32, dtype=np_type).reshape(1, 32)
    mask = (1 << bits) - 1
    if op == "LOGICAL_LEFT_SHIFT":
        bits_out = (x.astype(np.int64) << s.astype(np.int64)) & mask
    else:       # zero_extend<uint32_t>(a) >> b, then static_cast<in_t>
        bits_out = (x.astype(np.int64) & mask) >> s.astype(np.int64)
    want = bits_out.astype(np.uint64).astype(np.dtype(f"u{bits // 8}")).view(np_type)
    assert np.array_equal(run1(new, x, s), want)


def test_constant_shifts_in_the_1_0_range_stay_one_operator():
    new = load080(_shift080("LOGICAL_LEFT_SHIFT", "INT8", np.full((1, 32), 7, np.int8)))
    assert [o.op for o in new] == ["LOGICAL_LEFT_SHIFT"]


@pytest.mark.parametrize("kind", ["FP16", "BF16"])
def test_080_fp16_bf16_convolutions_to_fp32_run_in_fp32(kind):
    """0.80's fp16/bf16 modes with an fp32 output accumulate in fp32 (S1 2.3.3); 1.0's round
    to the input type, so the upgrade casts the inputs (exactly) and runs an fp32 conv."""
    np_type = {"FP16": np.float16, "BF16": __import__("ml_dtypes").bfloat16}[kind]
    rng = np.random.default_rng(5)
    w = rng.normal(size=(3, 2, 2, 4)).astype(np_type)
    g = graph080([Op080("CONV2D", ["x", "w", "b"], ["y"], dict(
        pad=[0, 0, 0, 0], stride=[1, 1], dilation=[1, 1], input_zp=0, weight_zp=0))],
        [Tensor080("x", [1, 5, 5, 4], kind), const("w", kind, w),
         const("b", "FP32", np.float32([0.5, -1, 2])), Tensor080("y", [1, 4, 4, 3], "FP32")],
        ["x"], ["y"])
    new = load080(g)
    assert [op.op for op in new] == ["CAST", "CONV2D"]
    conv = new.operators[1]
    assert (conv.input.dtype.name, conv.weight.dtype.name, conv.acc_type) == ("fp32",) * 3
    assert np.array_equal(conv.const("weight"), w.astype(np.float32))
    x = rng.normal(size=(1, 5, 5, 4)).astype(np_type)
    xs, ws = x.astype(np.float64), w.astype(np.float64)
    want = np.array([[[[np.sum(xs[0, i:i + 2, j:j + 2] * ws[o]) for o in range(3)]
                       for j in range(4)] for i in range(4)]]) + [0.5, -1, 2]
    assert np.allclose(run1(new, x), want, rtol=1e-6, atol=1e-5)


def test_convolution_types_0_80_lacks_are_errors():
    g = graph080([Op080("CONV2D", ["x", "w", "b"], ["y"], dict(
        pad=[0, 0, 0, 0], stride=[1, 1], dilation=[1, 1], input_zp=0, weight_zp=0))],
        [Tensor080("x", [1, 2, 2, 2], "BF16"), const("w", "BF16", np.ones((2, 1, 1, 2))),
         const("b", "BF16", np.zeros(2)), Tensor080("y", [1, 2, 2, 2], "BF16")], ["x"], ["y"])
    with pytest.raises(TosaError, match=r"CONV2D\[y\]: bf16 -> bf16 is not a TOSA 0.80 CONV2D "
                                        r"mode"):
        load080(g)


def test_clamp_bounds_beyond_the_type_clip_nothing():
    def clamp(low, high):
        return graph080([Op080("CLAMP", ["x"], ["y"], dict(
            min_int=low, max_int=high, min_fp=b"", max_fp=b""))],
            [Tensor080("x", [1, 3], "INT8"), Tensor080("y", [1, 3], "INT8")], ["x"], ["y"])
    op = load080(clamp(-1000, 2 ** 31 - 1)).operators[0]
    assert (op.min_val, op.max_val, op.nan_mode) == (-128, 127, "PROPAGATE")
    with pytest.raises(TosaError, match=r"CLAMP\[y\]: min_int = 200, max_int = 300 do not fit"):
        load080(clamp(200, 300))


def _layout_graph():
    """MUL shift, TABLE, PAD, RESHAPE, SLICE, TRANSPOSE, MATMUL and AVG_POOL2D zero points."""
    rng = np.random.default_rng(9)
    table = rng.integers(-128, 128, 256)
    ops = [
        Op080("TABLE", ["x"], ["t"], {"table": [int(v) for v in table]}),
        Op080("PAD", ["t"], ["p"], {"padding": [0, 0, 1, 0, 0, 1, 0, 0], "pad_const_int": -7,
                                    "pad_const_fp": b""}),
        Op080("AVG_POOL2D", ["p"], ["a"], dict(pad=[0, 0, 0, 0], kernel=[2, 2], stride=[1, 1],
                                              input_zp=-7, output_zp=3, accum_dtype="INT32")),
        Op080("SLICE", ["a"], ["s"], {"start": [0, 1, 0, 0], "size": [-1, 2, 3, 2]}),
        Op080("TRANSPOSE", ["s"], ["tr"], {"perms": [0, 2, 1, 3]}),
        Op080("RESHAPE", ["tr"], ["r"], {"new_shape": [1, 3, 4]}),
        Op080("MATMUL", ["r", "m"], ["mm"], {"a_zp": 3, "b_zp": -1}),
        Op080("MUL", ["mm", "k"], ["y"], {"shift": 3}),
    ]
    tensors = [Tensor080("x", [1, 3, 3, 2], "INT8"), Tensor080("t", [1, 3, 3, 2], "INT8"),
               Tensor080("p", [1, 4, 4, 2], "INT8"), Tensor080("a", [1, 3, 3, 2], "INT8"),
               Tensor080("s", [1, 2, 3, 2], "INT8"), Tensor080("tr", [1, 3, 2, 2], "INT8"),
               Tensor080("r", [1, 3, 4], "INT8"),
               const("m", "INT8", rng.integers(-128, 128, (1, 4, 5))),
               Tensor080("mm", [1, 3, 5], "INT32"), const("k", "INT32", [[[1000]]]),
               Tensor080("y", [1, 3, 5], "INT32")]
    return graph080(ops, tensors, ["x"], ["y"]), table


def _layout_oracle(x, table, m):
    t = table[x.astype(np.int64) + 128]
    p = np.pad(t, ((0, 0), (1, 0), (0, 1), (0, 0)), constant_values=-7)
    acc = sum(p[:, i:i + 3, j:j + 3] - (-7) for i in range(2) for j in range(2))
    a = np.clip(np.where(acc >= 0, (2 * acc + 4) // 8, -((-2 * acc + 4) // 8)) + 3, -128, 127)
    r = a[:, 1:3, :, :].transpose(0, 2, 1, 3).reshape(1, 3, 4)
    mm = (r - 3) @ (m.astype(np.int64) + 1)
    return (mm * 1000 + 4) >> 3


def test_attributes_become_inputs_with_080_meaning():
    g, table = _layout_graph()
    new = load080(g)
    assert [op.op for op in new] == [op.op for op in g.ops]
    assert new.operators[0].const("table").dtype == np.int8
    assert new.operators[3].const("size").tolist() == [1, 2, 3, 2]      # -1 from the output
    assert new.operators[7].scalar("shift") == 3
    x = np.random.default_rng(4).integers(-128, 128, (1, 3, 3, 2)).astype(np.int8)
    want = _layout_oracle(x, table, g.tensors["m"].data)
    assert np.array_equal(run1(new, x), want)


def test_forms_round_trip_through_both_080_writers():
    g, _ = _layout_graph()
    new = load080(g)
    texts = [print_080(downgrade(new), d) for d in ("llvm17", "llvm18")]
    assert "shift = 3 : i32" in texts[0] and "shift = 3 : i8" in texts[1]     # MUL
    for data in [write_080(downgrade(new))] + [t.encode() for t in texts]:
        again = load_graph(data)
        assert [(op.op, op.name, op.attrs) for op in again] == \
            [(op.op, op.name, op.attrs) for op in new]
        x = np.random.default_rng(6).integers(-128, 128, (1, 3, 3, 2)).astype(np.int8)
        assert np.array_equal(run1(again, x), run1(new, x))


# -- errors ---------------------------------------------------------------------------------

def test_unknown_operators_are_one_line_errors():
    g = graph080([Op080("RESERVED", ["x"], ["y"])],
                 [Tensor080("x", [2], "INT32"), Tensor080("y", [2], "INT32")], ["x"], ["y"])
    with pytest.raises(TosaError, match=r"RESERVED\[y\]: unknown operator for TOSA 0.80"):
        load080(g)
    data = bytearray(write_080(graph080(
        [Op080("CLZ", ["x"], ["y"])],
        [Tensor080("x", [2], "INT32"), Tensor080("y", [2], "INT32")], ["x"], ["y"])))
    pos = data.find(np.uint32(34).tobytes())          # the CLZ enum value
    data[pos:pos + 4] = np.uint32(99).tobytes()
    with pytest.raises(TosaError, match=r"corrupt flatbuffer: op = 99 is not a Op value"):
        load_graph(bytes(data))
    text = ("func.func @main(%a: tensor<2xi32>) -> tensor<2xi32> {\n"
            "  %0 = tosa.bogus %a {quantization_info = #tosa.unary_quant<input_zp = 0, "
            "output_zp = 0>} : (tensor<2xi32>) -> tensor<2xi32>\n  return %0 : tensor<2xi32>\n}")
    with pytest.raises(TosaError, match=r"^m.mlir:2: unknown operator tosa.bogus$"):
        parse_080(text, "m.mlir")


@pytest.mark.parametrize("op, message", [
    ("COND_IF", "control flow is not supported"),
    ("DIM", "DIM was removed in TOSA 1.0"),
    ("CUSTOM", "CUSTOM operators are implementation-defined"),
])
def test_080_constructs_without_a_1_0_form(op, message):
    g = graph080([Op080(op, ["x"], ["y"], {})],
                 [Tensor080("x", [2], "INT32"), Tensor080("y", [2], "INT32")], ["x"], ["y"])
    with pytest.raises(TosaError, match=rf"{op}\[y\]: {message}"):
        load080(g)
    bad = graph080([Op080("ADD", ["x", "x"], ["y"])],
                   [Tensor080("x", [2], "UINT8"), Tensor080("y", [2], "UINT8")], ["x"], ["y"])
    with pytest.raises(TosaError, match=r"ADD\[y\]: reads or writes x of an unsigned 0.80 type"):
        load080(bad)


def test_truncated_and_corrupt_files_are_one_line_errors():
    g, _ = _layout_graph()
    data = write_080(g)
    for n in range(0, len(data), 7):
        with pytest.raises(TosaError) as err:
            load_graph(data[:n])
        assert "\n" not in str(err.value)
    rng = np.random.default_rng(11)
    for _ in range(300):          # corrupt bytes: a graph or a TosaError, nothing else
        bad = bytearray(data)
        for pos in rng.integers(8, len(bad), 2):
            bad[pos] = int(rng.integers(0, 256))
        try:
            load_graph(bytes(bad))
        except TosaError as exc:
            assert "\n" not in str(exc)
    text = print_080(g)
    for n in range(0, len(text), 97):
        with pytest.raises(TosaError, match=r"^<bytes>(:\d+)?: "):
            load_graph(text[:n].encode() + b" new_shape")


@pytest.mark.parametrize("build, message", [
    (lambda b: b.cast(b.input((2,), "fp16", "x"), "fp8e4m3"),
     r"CAST\[.*\]: tensor .* is fp8e4m3, which TOSA 0.80 does not have"),
    (lambda b: b.op("RESCALE", [b.input((2,), "int32", "x"), b.const([1 << 30], "int32"),
                                b.const([32], "int8"), b.zero_point(0, "int32"),
                                b.zero_point(0, "int8")], (2,), "int8", scale32=True,
                    rounding_mode="INEXACT_ROUND", per_channel=False, input_unsigned=False,
                    output_unsigned=False),
     r"RESCALE\[.*\]: rounding_mode INEXACT_ROUND has no TOSA 0.80 form"),
    (lambda b: b.unary("COS", b.input((2,), "fp32", "x")), r"COS\[.*\]: has no TOSA 0.80 form"),
])
def test_what_080_cannot_express_is_a_one_line_error(build, message):
    b = GraphBuilder()
    g = b.build(build(b))
    with pytest.raises(TosaError, match=message):
        graph_bytes(g, "0.80")


def test_1_0_only_convolution_modes_are_refused():
    b = GraphBuilder()
    x = b.input((1, 2, 2, 2), "bf16", "x")
    y = b.conv2d(x, b.const(np.ones((2, 1, 1, 2)), "bf16"), b.const(np.zeros(2), "bf16"))
    with pytest.raises(TosaError, match=r"CONV2D\[.*\]: bf16 -> bf16 accumulating in fp32 has "
                                        r"no TOSA 0.80 form"):
        graph_bytes(b.build(y), "0.80")


# -- the command line -------------------------------------------------------------------------

def test_cli_writes_and_inspects_080(tmp_path, capsys):
    g, _ = _layout_graph()
    src = tmp_path / "g.tosa"
    src.write_bytes(write_080(g))
    out, text = tmp_path / "again.tosa", tmp_path / "again.mlir"
    assert main(["import", str(src), "-o", str(out), "--tosa-version", "0.80"]) == 0
    assert main(["import", str(src), "-o", str(text)]) == 0
    assert main(["inspect", str(out), "--json", str(tmp_path / "i.json")]) == 0
    printed = capsys.readouterr().out
    assert "TOSA 0.80, 8 operators" in printed and \
        "source:  .tosa flatbuffer, TOSA 0.80.0 (upgraded to 1.0 on reading)" in printed
    summary = json.loads((tmp_path / "i.json").read_text())
    assert (summary["format"], summary["tosa_version"]) == ("tosa", "0.80.0")
    assert main(["inspect", str(text)]) == 0
    assert "source:  TOSA MLIR text, TOSA 0.80 (upgraded" in capsys.readouterr().out


def test_cli_refusals_are_one_line_and_write_nothing(tmp_path, capsys):
    b = GraphBuilder()
    src = tmp_path / "cos.tosa"
    b.save(src, b.unary("COS", b.input((2,), "fp32", "x")))
    out = tmp_path / "cos080.tosa"
    assert main(["import", str(src), "-o", str(out), "--tosa-version", "0.80"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "has no TOSA 0.80 form" in err and not out.exists()
    assert main(["import", str(src), "-o", str(tmp_path / "x.mlir"), "--tosa-version",
                 "1.0"]) == 2
    assert "MLIR text is written for TOSA 0.80 only" in capsys.readouterr().err
    assert not list(tmp_path.glob("*.mlir"))
