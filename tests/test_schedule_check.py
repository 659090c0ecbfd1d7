"""The scheduler's check: goldens from one whole-graph run, fp64 bounds in-process, verdicts
unchanged."""

import json

import pytest

from tests.check_verdicts import CASES, FIXTURE, key, record
from tests.models import model


@pytest.mark.slow
@pytest.mark.parametrize("target,name,mode", CASES, ids=[key(*c) for c in CASES])
def test_check_verdicts(target, name, mode):
    """Every layer's and output's verdict (status, counts, errors, rule and its figures, the
    narrower type's verdict) is the one recorded with the precise-mode subprocess."""
    expected = json.loads(FIXTURE.read_text())[key(target, name, mode)]
    found = json.loads(json.dumps(record(model(f"{name}.tflite"), target, mode)))
    assert found["outputs"] == expected["outputs"]
    for index, verdict in expected["layers"].items():
        assert found["layers"][index] == verdict, index
