"""Write the data of the HMX example traces: inputs, and expected outputs computed with numpy.

    python examples/hmx/make_examples.py [OUT_DIR]     (default: examples/hmx/data)

The VTCM images of the manual's worked examples are written the way its C code writes them
(``write_act_vtcm``, ``write_wgt_vtcm``, ``write_bias_vtcm`` in section 3.1: one FP16 after the
other in address order), so they check the simulator's layouts too. Expected results come from
exact float64 arithmetic rounded once to FP16 here, not from the simulator. Deterministic.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent


# -- the manual's VTCM writers (section 3.1), in address order ----------------------------------

def write_act_vtcm(offset: float = 0.0) -> np.ndarray:
    """Spatial s, channel c holds s + 0.01 c (+ offset), 2 spatials per 128-byte vector."""
    out = []
    for vec in range(16):
        for ch in range(32):
            for sp_in_vec in range(2):
                out.append(vec * 2 + sp_in_vec + ch * 0.01 + offset)
    return np.array(out, dtype=np.float16)


def write_wgt_vtcm(value_offset: int = 0) -> np.ndarray:
    """Input channel i, output o: o (+ value_offset) on the diagonal, else 0."""
    out = []
    for vec in range(16):
        for o in range(32):
            for in_ch_vec in range(2):
                out.append(o + value_offset if vec * 2 + in_ch_vec == o else 0)
    return np.array(out, dtype=np.float16)


def write_bias_vtcm() -> np.ndarray:
    """Scale 1 in bits [15:0] of every register, everything else 0: 256 bytes."""
    low = np.full(32, np.float16(1.0).view(np.uint16), dtype="<u4")
    return np.concatenate([low, np.zeros(32, dtype="<u4")]).view(np.uint8)


def crouton_bytes(cells: np.ndarray) -> np.ndarray:
    """``cells[s, c]`` (float16) in the result layout (Figure 19), written as the manual's loop."""
    out = [cells[vec * 2 + sp, ch] for vec in range(16) for ch in range(32) for sp in range(2)]
    return np.array(out, dtype=np.float16).view(np.uint8)


def act_cells(offset: float = 0.0) -> np.ndarray:
    """The activation values as ``[s, c]`` float64 (rounded to FP16 first)."""
    s, c = np.arange(32)[:, None], np.arange(32)[None, :]
    return (s + c * 0.01 + offset).astype(np.float16).astype(np.float64)


def to_fp16(x: np.ndarray, inf_nan: bool = False) -> np.ndarray:
    """Round float64 to FP16 once. Without Inf/NaN (USR[20] = 0, the default) the top exponent
    is one more binade: values from 65520 round with a 64 quantum up to 131008, then saturate."""
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(over="ignore"):
        out = x.astype(np.float16).view(np.uint16).copy()
    if not inf_nan:
        big = np.abs(x) >= 65520
        q = np.minimum(np.rint(np.abs(x[big]) / 64), 2047)  # 2047 * 64 = 131008
        mant = q.astype(np.int64) - 1024  # exponent field 31, q in 1024..2047
        out[big] = (np.signbit(x[big]).astype(np.uint16) << 15) | (31 << 10) | mant.astype(
            np.uint16)
    return out.view(np.float16)


def round_fp16_plus4(x: np.ndarray) -> np.ndarray:
    """Round positive float64 to 15 significant bits (FP16 with 4 extra mantissa bits)."""
    e = np.floor(np.log2(np.maximum(np.abs(x), 2.0 ** -14)))
    quantum = 2.0 ** (e - 14)
    return np.rint(x / quantum) * quantum


# -- the examples ---------------------------------------------------------------------------------

def manual_examples() -> dict[str, np.ndarray]:
    act, wgt, diag = act_cells(), write_wgt_vtcm(), np.arange(32.0)
    files = {"act.npy": write_act_vtcm(), "act_next.npy": write_act_vtcm(32.0),
             "wgt.npy": wgt, "wgt_plus32.npy": write_wgt_vtcm(32), "bias.npy": write_bias_vtcm()}
    acc = act * diag  # ACC(s, o) = a[s, o] * o: the diagonal picks input channel o
    files["basic_multiply_out.npy"] = crouton_bytes(to_fp16(acc))
    in_range = (diag >= 8) & (diag <= 15)
    files["channel_range_out.npy"] = crouton_bytes(to_fp16(acc * in_range))
    files["deep_three_out.npy"] = crouton_bytes(to_fp16(3 * acc))
    partial = acc * ((diag >= 24).astype(float) + 1 + (diag <= 15))
    files["deep_partial_out.npy"] = crouton_bytes(to_fp16(partial))
    files["weight_deep_out0.npy"] = crouton_bytes(to_fp16(acc))
    files["weight_deep_out1.npy"] = crouton_bytes(to_fp16(act * (diag + 32)))
    # single, Y = 5 under mask 11100 (4 wide, 8 tall): accumulator row y takes crouton row y + 5,
    # rows 8.. from the next crouton (spatial s = 4 y + x)
    both = np.concatenate([act, act_cells(32.0)])
    source = [(s + 20) if s + 20 < 32 else 32 + s - 12 for s in range(32)]
    files["single_y5_out.npy"] = crouton_bytes(to_fp16(both[source] * diag))
    # feedback: C' = ACC to FP16+4 (rnd = 1); C = max(1, C') * ACC
    files["feedback_out.npy"] = crouton_bytes(to_fp16(np.maximum(1.0, round_fp16_plus4(acc))
                                                      * acc))
    return files


def dma_hvx_example() -> dict[str, np.ndarray]:
    """An 8 x 8 x 64 layer in DDR: 1x1 convolution to 64 filters, scale, bias, ReLU."""
    rng = np.random.default_rng(2026)
    x = (rng.integers(-16, 17, (8, 8, 64)) / 8).astype(np.float16)  # multiples of 1/8
    w = (rng.integers(-16, 17, (64, 64)) / 16).astype(np.float16)  # [o, c], multiples of 1/16
    scale = rng.choice([0.25, 0.5, 1.0], 64)
    bias = rng.integers(-8, 9, 64) / 4
    rows = np.stack([np.zeros(64), scale, bias], axis=1).astype(np.float16)  # b_i, s, b_o
    acc = np.einsum("hwc,oc->hwo", x.astype(np.float64), w.astype(np.float64))  # exact
    y = to_fp16(acc * scale + bias).astype(np.float64)
    out = np.where(y > 0, y, 0.0).astype(np.float16)
    return {"layer_x.npy": x, "layer_w.npy": w, "layer_bias.npy": rows, "layer_out.npy": out}


def classifier_head_example() -> dict[str, np.ndarray]:
    """FP32 features [4, 4, 10] -> FP16, global average pool, softmax, padded to 16 lanes, FP32.
    Each step rounds once to FP16 (the pool and the sum accumulate in FP32 first)."""
    rng = np.random.default_rng(7)
    x = rng.normal(0, 2, (4, 4, 10)).astype(np.float32)
    h = x.astype(np.float16).astype(np.float32).reshape(16, 10)
    total = np.zeros(10, np.float32)
    for row in h:  # FP32 additions in row-major order
        total = (total + row).astype(np.float32)
    pooled = (total / np.float32(16)).astype(np.float16).astype(np.float64)
    shifted = (pooled - pooled.max()).astype(np.float16).astype(np.float64)
    e = np.exp(shifted).astype(np.float16)
    s = np.float32(0)
    for v in e.astype(np.float32):
        s = np.float32(s + v)
    inv = np.float16(1.0 / np.float64(np.float16(s)))
    probs = np.zeros(16, np.float16)
    probs[:10] = (e.astype(np.float64) * np.float64(inv)).astype(np.float16)
    return {"head_x.npy": x, "head_out.npy": probs.astype(np.float32)}


def double_buffer_example() -> dict[str, np.ndarray]:
    """An 8 x 4 x 32 activation and four 32-filter weight groups streamed through two VTCM
    buffers, pre-packed in DDR (Figure 8 layout, written here by its formula)."""
    rng = np.random.default_rng(11)
    x = (rng.integers(-16, 17, (8, 4, 32)) / 8).astype(np.float16)
    w = (rng.integers(-16, 17, (128, 32)) / 16).astype(np.float16)  # [o, i]
    packed = w.reshape(4, 32, 16, 2).transpose(0, 2, 1, 3)  # group, vector, o, i (o * 2 + i)
    acc = np.einsum("hwc,oc->hwo", x.astype(np.float64), w.astype(np.float64)).reshape(32, 128)
    out = [crouton_bytes(to_fp16(acc[:, g * 32:(g + 1) * 32])) for g in range(4)]
    return {"db_x.npy": x, "db_w.npy": np.ascontiguousarray(packed),
            "db_out.npy": np.concatenate(out)}


def main(argv: list[str]) -> int:
    out_dir = Path(argv[1]) if len(argv) > 1 else HERE / "data"
    out_dir.mkdir(parents=True, exist_ok=True)
    made = {**manual_examples(), **dma_hvx_example(), **classifier_head_example(),
            **double_buffer_example()}
    for name, array in made.items():
        np.save(out_dir / name, array)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
