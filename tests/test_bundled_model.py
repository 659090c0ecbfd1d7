"""The bundled example model (the quick start's main job) is reproducible and runs exactly."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np

import hwsim

MODELS = Path(__file__).resolve().parents[1] / "examples" / "models"


def test_bundled_model_is_what_the_script_writes(tmp_path):
    script = (MODELS / "make_models.py").read_text()
    copy = tmp_path / "make_models.py"
    copy.write_text(script)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(MODELS.parents[1])] + sys.path)}
    subprocess.run([sys.executable, str(copy)], check=True, cwd=tmp_path, env=env)
    for name in ("ds_cnn_int8.tosa", "ds_cnn_int8_input.npy"):
        assert (tmp_path / name).read_bytes() == (MODELS / name).read_bytes(), name


def test_quick_start_estimate_is_bit_exact():
    report = hwsim.estimate(MODELS / "ds_cnn_int8.tosa", "gap9", check=True,
                            inputs=np.load(MODELS / "ds_cnn_int8_input.npy"))
    assert report.cycles == 369_308
    assert [row.verdict.status for row in report.layers] == ["exact"] * 26
