"""What the scheduler's report says: the headline, the verdict columns, the machine
configuration in the JSON, and the notes that explain a row."""

import hwsim
from hwsim.tosa import models

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
