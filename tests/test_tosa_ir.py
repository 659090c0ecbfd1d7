"""The graph IR: construction, navigation, element types, and the ERROR_IF checks."""

import copy
import pickle

import numpy as np
import pytest

from hwsim.errors import TosaError
from hwsim.tosa.builder import GraphBuilder, quantize_scale
from hwsim.tosa.dtypes import dtype, from_bytes, to_bits, from_bits
from hwsim.tosa.ir import Graph, Operator, Tensor
from hwsim.tosa.ops import SPECS
from hwsim.tosa.schema import schema


def conv_graph(pad=(1, 1, 1, 1), stride=(1, 1), bias_len=8, input_zp=3, dt="int8",
               out_shape=None):
    x = Tensor("x", (1, 6, 6, 4), dt)
    w = Tensor("w", (8, 3, 3, 4), dt, np.ones((8, 3, 3, 4)))
    b = Tensor("b", (bias_len,), "int32" if dt == "int8" else dt, np.zeros(bias_len))
    zps = [Tensor("izp", (1,), dt, [input_zp]), Tensor("wzp", (1,), dt, [0])]
    y = Tensor("y", out_shape or (1, 6, 6, 8), "int32" if dt == "int8" else dt)
    acc = "int32" if dt == "int8" else "fp32"
    op = Operator("CONV2D", [x, w, b] + zps, [y], dict(
        pad=list(pad), stride=list(stride), dilation=[1, 1], local_bound=False, acc_type=acc))
    return Graph([op], [x], [y])


def test_operator_attributes_and_roles_read_as_fields():
    g = conv_graph()
    op = g.operators[0]
    assert op.pad == [1, 1, 1, 1] and op.acc_type == "int32" and op.local_bound is False
    assert op.weight.name == "w" and op.input.name == "x" and op.output.name == "y"
    assert op.scalar("input_zp") == 3 and op.const("weight").shape == (8, 3, 3, 4)
    assert op.macs == 6 * 6 * 8 * 3 * 3 * 4
    assert op.param_bytes == 288 + 32 + 1 + 1
    with pytest.raises(AttributeError):
        op.nonexistent
    with pytest.raises(TosaError, match=r"input input \(x\) is not a constant"):
        op.const("input")


def test_graph_navigation_in_topological_order():
    b = GraphBuilder()
    x = b.input((1, 4), "int32")
    y = b.add(x, x)
    z = b.sub(y, x)
    w = b.add(z, y)
    g = Graph(list(reversed(b.operators)), b.inputs, [w])      # any order in, sorted out
    assert [op.output.name for op in g] == [y.name, z.name, w.name]
    assert g.producer(y).op == "ADD" and g.producer(x) is None
    assert [op.output.name for op in g.consumers(y)] == [z.name, w.name]
    assert [op.output.name for op in g.consumers(x.name)] == [y.name, z.name]
    copied = pickle.loads(pickle.dumps(g))     # the order is the copy's own, not by old ids
    assert [op.output.name for op in copied.consumers(y.name)] == [z.name, w.name]
    assert len(g) == 3 and g.tensor(x.name) is x
    single = g.operator_graph(g.operators[1])
    assert [t.name for t in single.inputs] == [y.name, x.name] and len(single) == 1


def test_an_operator_on_other_tensors():
    op = conv_graph().operators[0]
    x2, y2 = Tensor("x2", (1, 6, 6, 4), "int8"), Tensor("y2", (1, 6, 6, 8), "int32")
    copy = op.on([x2] + op.inputs[1:], [y2])
    assert copy.name == "y2" and op.on([x2] + op.inputs[1:], [y2], "c").name == "c"
    assert copy.attrs == op.attrs and copy.attrs is not op.attrs
    assert copy.input is x2 and copy.output is y2 and op.input.name == "x"   # roles: its own
    assert Graph([copy], [x2], [y2]).operators == [copy]


def test_operators_known_valid_are_not_checked_again_but_the_structure_is():
    x, y = Tensor("x", (1, 4), "int32"), Tensor("y", (1, 5), "int32")
    bad = Operator("ADD", [x, x], [y])                      # the output shape is wrong
    with pytest.raises(TosaError, match=r"output shape \[1, 5\] != \[1, 4\]"):
        Graph([bad], [x], [y])
    assert Graph([bad], [x], [y], valid_ops=True).operators == [bad]
    with pytest.raises(TosaError, match="never produced"):
        Graph([], [x], [y], valid_ops=True)


def test_operators_unpickle():
    g = conv_graph()
    op = pickle.loads(pickle.dumps(g)).operators[0]
    assert op.pad == [1, 1, 1, 1] and op.weight.name == "w" and op.macs == g.operators[0].macs


def test_a_pickled_graph_is_the_same_graph():
    g = conv_graph()
    copied = pickle.loads(pickle.dumps(g, protocol=pickle.HIGHEST_PROTOCOL))
    for a, b in zip(g, copied, strict=True):
        assert (a.op, a.name, a.attrs, a.spec) == (b.op, b.name, b.attrs, b.spec)
        for x, y in zip(a.inputs + a.outputs, b.inputs + b.outputs, strict=True):
            assert (x.name, x.shape, x.is_const) == (y.name, y.shape, y.is_const)
            assert y.dtype is x.dtype       # the one instance of its type, found by name
            assert x.data is None or (np.array_equal(x.data, y.data) and
                                      x.data.dtype == y.data.dtype)
    op, twin = g.operators[0], copied.operators[0]
    assert twin.weight is copied.tensor("w") and twin.roles().keys() == op.roles().keys()
    assert copied.producer(twin.output) is twin and copy.copy(op).attrs is op.attrs


def test_structure_errors_are_one_line_and_name_the_problem():
    x, y = Tensor("x", (1, 4), "int32"), Tensor("y", (1, 4), "int32")
    add = lambda a, b, out: Operator("ADD", [a, b], [out])        # noqa: E731
    with pytest.raises(TosaError, match="never produced"):
        Graph([], [x], [y])
    with pytest.raises(TosaError, match="neither a graph input"):
        Graph([add(x, y, Tensor("z", (1, 4), "int32"))], [x], [x])
    z = Tensor("z", (1, 4), "int32")
    with pytest.raises(TosaError, match="cycle"):
        Graph([add(x, z, y), add(y, x, z)], [x], [y])
    with pytest.raises(TosaError, match="two different tensors are named x"):
        Graph([add(x, Tensor("x", (1, 4), "int32"), y)], [x], [y])
    with pytest.raises(TosaError, match="already a graph input"):
        Graph([add(x, x, y), add(y, y, y)], [x], [y])
    with pytest.raises(TosaError, match="unknown operator"):
        Operator("FOO", [x], [y])
    with pytest.raises(TosaError, match="missing attribute round"):
        Operator("ARITHMETIC_RIGHT_SHIFT", [x, x], [y])
    with pytest.raises(TosaError, match="unknown attribute bogus"):
        Operator("ADD", [x, x], [y], {"bogus": 1})
    with pytest.raises(TosaError, match="dimension < 1"):
        Tensor("t", (1, -1), "int8")
    with pytest.raises(TosaError, match=r"do not fit int8"):
        Tensor("t", (2,), "int8", [0, 300])
    with pytest.raises(TosaError, match="unknown element type"):
        Tensor("t", (2,), "int7")


@pytest.mark.parametrize("change, message", [
    (dict(pad=(-1, 0, 0, 0)), r"ERROR_IF\(pad_top < 0"),
    (dict(stride=(0, 1)), r"ERROR_IF\(stride_y < 1"),
    (dict(stride=(2, 2), out_shape=(1, 3, 3, 8)), r"is not a multiple of 2"),
    (dict(bias_len=5), r"ERROR_IF\(BC != OC && BC != 1\) with BC = 5, OC = 8"),
    (dict(dt="fp32", input_zp=2), r"i8_t>\(\) && input_zp != 0\) with input_zp = 2"),
    (dict(out_shape=(1, 5, 5, 8)), r"output shape \[1, 5, 5, 8\] != \[1, 6, 6, 8\]"),
])
def test_conv2d_error_ifs(change, message):
    with pytest.raises(TosaError, match=message) as info:
        conv_graph(**change)
    assert str(info.value).startswith("CONV2D[y]: ") and "\n" not in str(info.value)


def test_conv2d_valid_variants_pass():
    conv_graph(bias_len=1)
    conv_graph(dt="fp32", input_zp=0)
    conv_graph(stride=(2, 2), pad=(1, 0, 1, 0), out_shape=(1, 3, 3, 8))


def rescale(in_t="int32", out_t="int8", izp=0, ozp=0, scale32=True, rounding="SINGLE_ROUND",
            iu=False, ou=False, per_channel=False, mult_t=None, nc=1):
    x, y = Tensor("x", (2, 3), in_t), Tensor("y", (2, 3), out_t)
    ins = [x, Tensor("m", (nc,), mult_t or ("int32" if scale32 else "int16"), [1 << 14] * nc),
           Tensor("s", (nc,), "int8", [14] * nc), Tensor("izp", (1,), in_t, [izp]),
           Tensor("ozp", (1,), out_t, [ozp])]
    return Graph([Operator("RESCALE", ins, [y], dict(
        scale32=scale32, rounding_mode=rounding, per_channel=per_channel, input_unsigned=iu,
        output_unsigned=ou))], [x], [y])


@pytest.mark.parametrize("kwargs, message", [
    (dict(izp=1), r"input_unsigned == false\) && input_zp != 0\) with input_zp = 1"),
    (dict(in_t="int16", iu=True, izp=5), r"input_zp != 32768\) with input_zp = 5"),
    (dict(in_t="int48", scale32=True), r"ERROR_IF\(scale32 && is_same<in_t,i48_t>\(\)\)"),
    (dict(scale32=False, rounding="DOUBLE_ROUND"), r"!scale32 && \(rounding_mode"),
    (dict(in_t="int8", iu=True, ou=True), r"input_unsigned && output_unsigned"),
    (dict(in_t="int8", out_t="int32", iu=True), r"is_same<out_t,i32_t>\(\) && input_unsigned"),
    (dict(ou=True), r"is_same<in_t,i32_t>\(\) && output_unsigned"),
    (dict(mult_t="int16"), r"multiplier m is int16\[1\], expected int32\[1\]"),
    (dict(per_channel=True), r"expected int32\[3\]"),
    (dict(in_t="fp32"), r"unsupported types \(input=fp32, output=int8\)"),
])
def test_rescale_error_ifs(kwargs, message):
    with pytest.raises(TosaError, match=message):
        rescale(**kwargs)


def test_rescale_valid_unsigned_and_per_channel():
    rescale(in_t="int16", iu=True, izp=-32768)             # stored int16 -32768 is u16 32768
    rescale(in_t="int8", out_t="int8", iu=True, izp=-56)   # u8 zero point 200
    rescale(per_channel=True, nc=3)


def test_other_operator_checks():
    b = GraphBuilder()
    x = b.input((2, 3), "int8")
    with pytest.raises(TosaError, match=r"ERROR_IF\(max_val < min_val\)"):
        b.clamp(x, 5, 1)
        b.build(b.operators[-1].output)
    b = GraphBuilder()
    x = b.input((2, 3), "int32")
    y = b.op("ADD", [x, b.input((2, 4), "int32")], (2, 4), "int32")
    with pytest.raises(TosaError, match=r"shape != broadcast_shape"):
        b.build(y)
    b = GraphBuilder()
    x = b.input((2, 3), "int8")
    with pytest.raises(TosaError, match=r"start\[index\] \+ size\[index\] > shape1"):
        b.build(b.slice(x, [1, 0], [2, 3]))
    b = GraphBuilder()
    x = b.input((2, 3), "int8")
    with pytest.raises(TosaError, match=r"perms is not a permutation"):
        b.build(b.op("TRANSPOSE", [x], (3, 2), "int8", perms=[0, 0]))
    b = GraphBuilder()
    x = b.input((2, 3), "int8")
    with pytest.raises(TosaError, match=r"table .* expected \[256\]"):
        b.build(b.table(x, np.zeros(513, np.int8)))
    b = GraphBuilder()
    x = b.input((2, 3), "int8")
    with pytest.raises(TosaError, match=r"tensor_size\(shape1\) != tensor_size\(shape\)"):
        b.build(b.op("RESHAPE", [x, b.shape([7])], (7,), "int8"))
    b = GraphBuilder()
    x = b.input((2, 3), "int8")
    with pytest.raises(TosaError, match=r"axis < 0 \|\| axis >= rank"):
        b.build(b.op("REDUCE_MAX", [x], (2, 1), "int8", axis=2, nan_mode="PROPAGATE"))
    b = GraphBuilder()
    x = b.input((1, 5, 5, 2), "int8")
    with pytest.raises(TosaError, match=r"pad_top >= kernel_y"):
        b.build(b.max_pool2d(x, (2, 2), (1, 1), (2, 0, 0, 0)))
    b = GraphBuilder()
    x = b.input((2, 3), "int8")
    with pytest.raises(TosaError, match=r"shapes1\[shape_index\]\[axis_index\]"):
        b.build(b.concat([x, b.input((3, 3), "int8")], 1))


def test_every_checked_operator_has_a_schema_attribute_table():
    for name, spec in SPECS.items():
        assert schema().attribute_table(name)
        assert spec.types, name


def test_builder_covers_operators_and_validates():
    b = GraphBuilder()
    x = b.input((1, 4, 4, 2), "int8")
    w = b.const(np.ones((3, 1, 1, 2)), "int8")
    acc = b.conv2d(x, w, b.const(np.zeros(3), "int32"), input_zp=-1)
    y = b.rescale(acc, [0.5, 0.25, 0.125], "int8")
    y = b.max_pool2d(b.avg_pool2d(y, (2, 2), (2, 2)), (1, 1))
    y = b.pad(b.transpose(y, (0, 2, 1, 3)), [0, 0, 1, 1, 0, 0, 0, 0], -128)
    y = b.concat([y, y], 3)
    m = b.matmul(b.reshape(y, (1, 8, 6)), b.const(np.ones((1, 6, 2)), "int8"))
    g = b.build(b.reduce("REDUCE_SUM", m, 2))
    assert [op.op for op in g][:3] == ["CONV2D", "RESCALE", "AVG_POOL2D"]
    assert g.macs == 16 * 3 * 2 + 8 * 2 * 6


@pytest.mark.parametrize("scale, expected", [
    (1.0, (1 << 30, 30)), (0.5, (1 << 30, 31)), (2.0 ** -20, (1 << 30, 50)),
    (0.75, (3 << 29, 31)), (1 - 2 ** -40, (1 << 30, 30)),
])
def test_quantize_scale(scale, expected):
    multiplier, shift = quantize_scale(scale)
    assert (multiplier, shift) == expected
    assert abs(multiplier * 2.0 ** -shift - scale) <= 2.0 ** -(shift + 1)


def test_quantize_scale_errors():
    with pytest.raises(TosaError, match="not positive"):
        quantize_scale(0.0)
    with pytest.raises(TosaError, match="outside 2..62"):
        quantize_scale(2.0 ** 40)
    assert quantize_scale(1.0, scale32=False) == (1 << 14, 14)


def test_dtype_bytes_round_trip():
    assert from_bytes(dtype("int48"), bytes.fromhex("010000000000feffffffffff"), (2,)).tolist() \
        == [1, -2]
    assert from_bytes(dtype("int4"), bytes.fromhex("e107"), (3,)).tolist() == [1, -2, 7]
    bf = from_bytes(dtype("bf16"), bytes.fromhex("c03f00c0"), (2,))
    assert bf.astype(np.float32).tolist() == [1.5, -2.0]
    assert to_bits(dtype("bf16"), bf).dtype == np.uint16
    assert from_bits(dtype("bf16"), to_bits(dtype("bf16"), bf)).tolist() == bf.tolist()
    assert dtype("FP8E4M3").name == "fp8e4m3" and dtype("int32").nbytes(3) == 12
    assert dtype("int4").nbytes(3) == 2
    with pytest.raises(TosaError, match="holds 1 int32 values, expected 2"):
        from_bytes(dtype("int32"), b"\0\0\0\0", (2,))
