"""Per-layer verdicts of FP16 layers in FP32 graphs: the FP32 verdict and the FP16 explanation."""

import numpy as np

from hwsim.schedule.hmx import conv as C
from hwsim.schedule.hmx.check import check_layer, fp16_operator
from hwsim.tosa.builder import GraphBuilder
from tests.test_schedule_hmx_layers import run_conv

FP32_MAX = float(np.finfo(np.float32).max)


def conv_graph(conv: C.Conv, w, b):
    builder = GraphBuilder("layer")
    x = builder.input((1, conv.h, conv.w, conv.c), "fp32")
    y = builder.conv2d(x, builder.const(w, "fp32"), builder.const(b, "fp32"), conv.stride,
                       conv.pad, conv.dilation)
    return builder.build(builder.clamp(y, 0.0, FP32_MAX)), x


def test_hmx_conv_deviates_from_fp32_and_meets_fp16():
    conv = C.Conv(6, 6, 24, 40, (3, 3), pad=(1, 1, 1, 1))
    got, _, _, _, _, (x, w, b) = run_conv(conv, inputs=True)
    graph, x_in = conv_graph(conv, w.astype(np.float32), b)
    op = graph.operators[0]
    values = {x_in.name: x.astype(np.float32)[None]}
    result = check_layer(graph, op, got[None].astype(np.float32), values)
    assert result.status == "deviates" and result.fp16.status == "compliant" and result.explained
    assert "ABS_BOUND" in str(result) and "within the FP16 bound" in str(result)


def test_a_wrong_layer_is_outside_both_bounds():
    conv = C.Conv(6, 6, 24, 40, (3, 3), pad=(1, 1, 1, 1))
    got, _, _, _, _, (x, w, b) = run_conv(conv, inputs=True)
    graph, x_in = conv_graph(conv, w.astype(np.float32), b)
    wrong = got.copy()
    wrong[2, 3, 5] += 2.0  # about 18 bound units: a layout or datapath bug
    result = check_layer(graph, graph.operators[0], wrong[None].astype(np.float32),
                         {x_in.name: x.astype(np.float32)[None]})
    assert result.status == "deviates" and result.fp16.status == "deviates"
    assert not result.explained and "OUTSIDE the FP16 bound" in str(result)


def test_fp16_operator_rounds_constants_and_accumulates_in_fp32():
    conv = C.Conv(4, 4, 8, 8)
    graph, _ = conv_graph(conv, np.full((8, 1, 1, 8), 0.1, np.float32), np.zeros(8, np.float32))
    op16 = fp16_operator(graph.operators[0])
    assert op16.output.dtype.name == "fp16" and op16.acc_type == "fp32"
    assert op16.weight.data.dtype == np.float16 and op16.weight.data[0, 0, 0, 0] == np.float16(0.1)
    clamp16 = fp16_operator(graph.operators[1])
    assert clamp16.max_val == float("inf") and clamp16.min_val == 0.0
