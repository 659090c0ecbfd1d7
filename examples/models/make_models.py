"""Write the bundled example model: a random-weight look-alike of an MLPerf Tiny network.

    python examples/models/make_models.py

``ds_cnn_int8.tosa`` is shaped like the keyword-spotting DS-CNN (49x10 MFCC input, int8), from
``hwsim.tosa.models`` with seed 0, and ``ds_cnn_int8_input.npy`` is a fixed input for it. They let
the quick start and the tests estimate a whole model without the downloaded MLPerf Tiny files.
"""

from pathlib import Path

import numpy as np

from hwsim.tosa import save_graph
from hwsim.tosa.models import model, sample_input

HERE = Path(__file__).resolve().parent


def main() -> None:
    ds_cnn = model("ds_cnn", dtype="int8")
    save_graph(ds_cnn, HERE / "ds_cnn_int8.tosa")
    np.save(HERE / "ds_cnn_int8_input.npy", sample_input(ds_cnn, seed=0))


if __name__ == "__main__":
    main()
