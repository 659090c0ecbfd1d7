"""What the scheduler's report says: the headline, the verdict columns, the machine
configuration in the JSON, and the notes that explain a row."""

import json
import math

import numpy as np

import hwsim
from hwsim.tosa import models
from hwsim.tosa.builder import GraphBuilder

SMALL_FP32 = dict(dtype="fp32", width=0.25, resolution=64)


def autoencoder_fp32():
    return models.model("autoencoder", **SMALL_FP32)


def test_the_headline_names_a_weight_width_only_where_weights_are_requantised():
    hmx = hwsim.estimate(autoencoder_fp32(), "hmx", numerics=False)
    assert hmx.weight_bits is None
    assert hmx.table().splitlines()[0].split(": ")[0].endswith("on hmx (fp16 mode, timing only)")
    gap9 = hwsim.estimate(models.model("autoencoder", width=0.25, resolution=64), "gap9",
                          weight_bits=4, numerics=False)
    assert gap9.weight_bits == 4
    assert "on gap9 (exact mode, 4-bit weights, timing only)" in gap9.table().splitlines()[0]
    assert gap9.to_json()["weight_bits"] == 4 and hmx.to_json()["weight_bits"] is None


def test_fp32_layers_on_hmx_lead_with_their_fp16_verdict_and_finite_errors():
    graph = models.model("resnet8", dtype="fp32", width=0.5, resolution=16)
    report = hwsim.estimate(graph, "hmx", check=True)
    narrow = [row for row in report.layers if row.verdict.narrow is not None]
    assert narrow and all(math.isfinite(v.max_err) for row in report.layers
                          for v in (row.verdict, row.verdict.narrow) if v is not None)
    for row in narrow:   # FP32 outside its bound: the cell says what FP16 makes of it first
        v = row.verdict
        assert v.brief().startswith(f"{v.narrow.status} as fp16") and "; fp32: deviates (" \
            in v.brief()
        assert v.narrow.status == "exact" or v.narrow.max_err <= 1.0, v.brief()
    relu = [row for row in narrow if row.kind == "CONV2D+CLAMP"]
    assert relu and all(row.verdict.max_err < 2 ** 13 for row in relu)  # a golden zeroed by
    # the ReLU no longer makes it infinite: errors count in ulps of the products' size
    header, first = report.csv().splitlines()[:2]
    cells = dict(zip(header.split(","), first.split(",")))
    assert (cells["type"], cells["err_unit"], cells["narrow_type"]) == ("fp32", "ULP", "fp16")
    assert cells["narrow_verdict"] in ("exact", "compliant")


def test_the_json_report_carries_the_whole_machine_configuration():
    graph = models.model("autoencoder", width=0.25, resolution=64)
    report = hwsim.estimate(graph, "gap9", params={"l2_bytes_per_cycle": "4"}, numerics=False)
    data = json.loads(report.json())
    assert set(data["params"]) == {row.name for row in hwsim.machine("gap9").PARAMS}
    assert data["params"]["l2_bytes_per_cycle"] == 4
    assert data["params"]["clock_hz"] == hwsim.machine("gap9").params.clock_hz
    assert data["param_origins"] == {"l2_bytes_per_cycle": "user", "ne16_timeline": "lowering"}
    again = hwsim.estimate(graph, "gap9", params=data["params"], numerics=False)
    assert again.cycles == report.cycles and again.params == report.params
    assert hwsim.estimate(graph, "gap9", numerics=False).cycles != report.cycles


def test_a_first_reshape_on_hmx_says_it_carries_the_input_conversion_and_first_weights():
    graph = autoencoder_fp32()
    report = hwsim.estimate(graph, "hmx", numerics=False)
    first = report.layers[0]
    assert first.kind == "RESHAPE" and first.macs == 0 and first.cycles == 262
    x = graph.inputs[0]
    assert first.notes == [
        "counts the program's work before the layers: input input from DDR "
        f"({x.nbytes:,} bytes), converted FP32 to FP16 on HVX; the DMA of layer 1's first "
        f"{first.bytes['DDR'] - x.nbytes:,} bytes of weights started (its bytes count here)"]
    assert first.bytes["DDR"] > x.nbytes and first.units == ("cvt", "dma", "hvx", "mpy")


def test_gap9_says_why_a_matrix_layer_is_not_on_ne16():
    b = GraphBuilder("conv")
    x = b.input((2, 6, 6, 16), "int8")
    weight = b.const(np.full((16, 3, 3, 16), 3, np.int8), "int8")
    acc = b.conv2d(x, weight, b.const(np.zeros(16, np.int32), "int32"), pad=(1, 1, 1, 1))
    graph = b.build(b.rescale(acc, 1 / 500, "int8"))
    two = hwsim.estimate(graph, "gap9", numerics=False)
    assert two.layers[0].units == ("cluster", "dma")
    assert two.layers[0].notes == [
        "on the cluster, not NE16: batch 2: this lowering gives NE16 batch-1 layers only"]
    assert "note: layer 0: on the cluster, not NE16: batch 2" in two.table()
    one = hwsim.estimate(models.model("ds_cnn", width=0.25, resolution=25), "gap9",
                         numerics=False)
    assert one.layers[0].notes == ["on the cluster, not NE16: NE16 takes 3x3 filters at stride "
                                   "1 or 2 and unpadded 1x1 at stride 1, not 10x4 at stride 2x2"]
    assert all(not row.notes for row in one.layers if "ne16" in row.units)
