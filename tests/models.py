"""Where the tests find the real MLPerf Tiny models.

The models are not part of the repository: they are the mlcommons/tiny reference models
(``benchmark/training/*/trained_models``) and are read from ``$HWSIM_MODELS`` when it is set,
else from ``../shared/models`` beside the checkout. Tests that need one skip cleanly when it is
absent (``model``), naming where to put it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

MODELS = Path(os.environ.get("HWSIM_MODELS") or
              Path(__file__).resolve().parents[2] / "shared" / "models")
WHERE = (f"MLPerf Tiny models not found in {MODELS} (set HWSIM_MODELS to a folder with the "
         "mlcommons/tiny reference .tflite files)")
needs_models = pytest.mark.skipif(not MODELS.is_dir(), reason=WHERE)


def model(name: str) -> Path:
    """The path of model file ``name`` (e.g. ``kws_ref_model.tflite``), or skip the test."""
    path = MODELS / name
    if not path.exists():
        pytest.skip(f"{name}: {WHERE}")
    return path
