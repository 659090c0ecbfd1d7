"""The scheduler's check: goldens from one whole-graph run, fp64 bounds in-process, verdicts
unchanged."""

import json

import numpy as np
import pytest

from tests.check_verdicts import CASES, FIXTURE, key, record
from tests.models import model


# A dot product's error figures are measured against its fp64 reference, which BLAS sums in
# another order than the reference model: they may differ by KS 2^-28 ULP at most (fp32,
# ``hwsim.tosa.fp64``); measured on these models: below 1e-9.
FIGURE_TOLERANCE_ULP = 1e-6


def assert_same_verdict(found: dict, expected: dict, where: str) -> None:
    """Equal verdicts (as plain data), the nested ones too; a dot product's error figures
    within ``FIGURE_TOLERANCE_ULP``."""
    assert found.keys() == expected.keys(), where
    for name, value in expected.items():
        if isinstance(value, dict):
            assert isinstance(found[name], dict), f"{where}.{name}"
            assert_same_verdict(found[name], value, f"{where}.{name}")
        elif name in ("max_err", "mean_err") and expected["check"].startswith("dot product"):
            assert found[name] == pytest.approx(value, rel=0, abs=FIGURE_TOLERANCE_ULP), \
                f"{where}.{name}"
        else:
            assert found[name] == value, f"{where}.{name}"


@pytest.mark.slow
@pytest.mark.parametrize("target,name,mode", CASES, ids=[key(*c) for c in CASES])
def test_check_verdicts(target, name, mode):
    """Every layer's and output's verdict (status, counts, errors, rule and its figures, the
    narrower type's and the integer model's verdicts) is the one recorded with the
    precise-mode subprocess and a reference run per layer set."""
    expected = json.loads(FIXTURE.read_text())[key(target, name, mode)]
    found = json.loads(json.dumps(record(model(f"{name}.tflite"), target, mode)))
    for part in ("outputs", "layers"):
        assert found[part].keys() == expected[part].keys()
        for index, verdict in expected[part].items():
            assert_same_verdict(found[part][index], verdict, f"{part}[{index}]")


def _layer_goldens(monkeypatch, graph, target, mode, perturb=(), share=False):
    """(goldens as the check finds them, every layer run on its inputs, the layers run
    again) of ``graph``'s layers on ``target`` when the simulation gave the reference's own
    values, except one element of each layer in ``perturb`` moved by one step; ``share``: with
    the reference worker (``_goldens``)."""
    from hwsim.schedule import check, lowering
    from hwsim.schedule.check import _goldens
    from hwsim.schedule.goldens import Ahead
    from hwsim.schedule.goldens import Goldens
    from hwsim.tosa.models import sample_input
    from hwsim.tosa.reference import goldens as every_tensor
    low = lowering(target)
    options = low.options(mode)
    graph = low.rewrite(graph, options).graph
    layers = low.layers(graph, options)
    x = sample_input(graph)
    whole = every_tensor(graph, x)
    values = {layer.index: whole[layer.output.name].copy() for layer in layers}
    for index in perturb:
        flat = values[index].reshape(-1)
        flat[0] = flat[0] + 1 if flat.dtype.kind == "i" and flat[0] < 100 else flat[0] * 0.5
    producer = {layer.output.name: layer.index for layer in layers}
    feeds = {layer.index: {t.name: values[producer[t.name]] if t.name in producer else x
                           for t in layer.inputs} for layer in layers}
    rerun = []

    def counted(made):
        def count(some, given, **options):
            rerun.extend(layer.index for layer in some)
            return made(some, given, **options)
        return count

    for name in ("Goldens", "Shared"):
        monkeypatch.setattr(check, name, counted(getattr(check, name)))
    separate = Goldens(layers, feeds, beside=False).result()
    return _goldens(graph, layers, feeds, whole, share, Ahead()), separate, rerun, layers


@pytest.mark.parametrize("name,dtype,target,mode", [("ds_cnn", "int8", "gap9", "exact"),
                                                     ("resnet8", "fp32", "hmx", None)])
def test_layer_goldens_come_from_the_whole_graph_run_unless_inputs_differ(monkeypatch, name,
                                                                           dtype, target, mode):
    """A layer whose inputs are the whole run's values takes its golden from that run; the
    layers reading a perturbed output run again, together; every golden is what running each
    layer on its inputs gives."""
    from hwsim.tosa.models import model as synthetic
    graph = synthetic(name, dtype=dtype, width=0.25)
    found, separate, rerun, layers = _layer_goldens(monkeypatch, graph, target, mode)
    assert rerun == [] and sorted(found) == [layer.index for layer in layers]
    for index, value in separate.items():
        assert found[index].dtype == value.dtype and np.array_equal(found[index], value)
    hit = layers[2].index
    found, separate, rerun, layers = _layer_goldens(monkeypatch, graph, target, mode,
                                                    perturb=[hit])
    readers = [layer.index for layer in layers
               if layers[2].output.name in {t.name for t in layer.inputs}]
    assert readers and rerun == readers
    for index, value in separate.items():
        assert found[index].tobytes() == value.tobytes(), index


def test_layer_goldens_shared_with_the_reference_worker_are_the_same(monkeypatch):
    """Run half here, half in the worker, the layers' goldens are what each layer run on its
    own inputs gives."""
    from hwsim.tosa import background
    from hwsim.tosa.models import model as synthetic
    graph = synthetic("ds_cnn", dtype="fp32", width=0.25)
    background.start(wait=60)
    submitted = []
    real = background.submit

    def submit(*args, **kwargs):
        pending = real(*args, **kwargs)
        submitted.append(pending.number)
        return pending

    monkeypatch.setattr(background, "submit", submit)
    found, separate, again, layers = _layer_goldens(monkeypatch, graph, "sme", "fp32",
                                                    perturb=range(6), share=True)
    assert len(again) > 1 and found.keys() == separate.keys()
    for index, value in separate.items():
        assert found[index].tobytes() == value.tobytes(), index
    assert len(submitted) == 1                          # one half went to the worker
    assert submitted[0] is not None or not background._usable()


def test_the_check_reports_the_reference_models_own_time_apart():
    """``wall`` splits a checked estimate into disjoint phases; ``reference`` is the time the
    check spent in the reference model, metered only inside the check."""
    import hwsim
    from hwsim.tosa.models import model as synthetic
    from hwsim.tosa.reference import metered, run_graph
    graph = synthetic("autoencoder", dtype="int8")
    report = hwsim.estimate(graph, "gap9", check=True)
    assert list(report.wall) == ["lower", "simulate", "attribute", "check", "reference"]
    assert report.wall["reference"] > 0 and report.wall["check"] > 0
    assert "reference" not in hwsim.estimate(graph, "gap9").wall
    x = np.zeros(graph.inputs[0].shape, np.int8)
    with metered() as outer:
        with metered() as inner:
            run_graph(graph, x)
        assert outer[0] == 0.0 < inner[0]
    run_graph(graph, x)
    assert outer[0] == 0.0


def _ahead_case():
    """A DS-CNN's layers, one operator each, their values in a whole-graph run, and an
    ``Ahead`` over them whose runs are the layers themselves."""
    from hwsim.schedule.goldens import Ahead
    from hwsim.schedule.lowering import Layer
    from hwsim.tosa.models import model as synthetic
    from hwsim.tosa.models import sample_input
    from hwsim.tosa.reference import goldens as every_tensor
    g = synthetic("ds_cnn", dtype="fp32", width=0.25)
    x = sample_input(g)
    whole = every_tensor(g, [x])
    layers = [Layer(i, [op]) for i, op in enumerate(g)]
    return layers, whole, Ahead(layers, {g.inputs[0].name: x}, lambda layer, f: (layer, f))


def test_goldens_go_ahead_as_the_outputs_that_feed_them_are_heard():
    """``Ahead`` makes a layer's run once the outputs of the layers that feed it are heard
    (an index that is no layer's, and an output heard again, change nothing), has submitted
    every run once every output that feeds one is heard, and its goldens are each layer's on
    its own inputs."""
    from hwsim.schedule.goldens import Goldens
    layers, whole, early = _ahead_case()
    producer = {layer.output.name: layer.index for layer in layers}
    heard = set()
    for layer in layers:
        assert set(early.made) == {m.index for m in layers if all(
            producer.get(t.name, -1) in heard or t.name not in producer for t in m.inputs)}
        early.heard(layer.index, whole[layer.output.name])
        early.heard(len(layers) + 7, np.zeros(1))
        heard.add(layer.index)
        submitted = [i for run in early.runs for i in run.which.values()]
        assert sorted(submitted + early.batch) == sorted(early.made)
        early.heard(layer.index, np.zeros(1))           # told again: ignored
    assert sorted(early.made) == [layer.index for layer in layers] and not early.batch
    feeds = {layer.index: {t.name: whole[t.name] for t in layer.inputs} for layer in layers}
    want = Goldens(layers, feeds, beside=False).result()
    found = early.results()
    assert found.keys() == want.keys()
    assert all(found[i].tobytes() == want[i].tobytes() for i in want)


@pytest.mark.parametrize("worker_done, run_work, runs", [(False, 0, "first, then the rest"),
                                                         (True, 0, "each"),
                                                         (True, 1 << 40, "all at the end")])
def test_goldens_ahead_wait_for_the_worker_or_a_share_of_the_work(monkeypatch, worker_done,
                                                                   run_work, runs):
    """While the worker has not finished the runs submitted before, made runs wait until their
    work reaches the share (every layer's here: one run at the end); once it has, each run
    made goes at once if it is worth a run (``RUN_WORK``), else it waits too."""
    from hwsim.schedule import goldens as module
    monkeypatch.setattr(module.Goldens, "done", lambda self: worker_done)
    monkeypatch.setattr(module, "PART_WORK", 1 << 40)
    monkeypatch.setattr(module, "RUN_WORK", run_work)
    layers, whole, early = _ahead_case()
    for layer in layers:
        early.heard(layer.index, whole[layer.output.name])
    sizes = [len(run.layers) for run in early.runs]
    n = len(layers)
    assert sizes == {"first, then the rest": [1, n - 1], "each": [1] * n,
                     "all at the end": [n]}[runs]


def test_values_round_to_a_narrower_type_as_through_fp64():
    """``check.rounded`` casts once from the values' own type: every float32 sign and
    exponent, with every pattern of the 14 low mantissa bits (those that decide the rounding
    of a normal float16 result) under two patterns of the high ones, rounds as through fp64."""
    from hwsim.schedule.check import rounded
    top = np.arange(512, dtype=np.uint32)[:, None] << np.uint32(23)         # sign and exponent
    low = np.arange(1 << 14, dtype=np.uint32)
    for high in (0x155, 0x1FF):
        x = (top | np.uint32(high << 14) | low).view(np.float32).reshape(-1)
        with np.errstate(over="ignore", invalid="ignore"):
            expected = x.astype(np.float64).astype(np.float16)
        found = rounded(x, np.float16)
        assert found.dtype == np.float16
        nan = np.isnan(expected)
        assert np.array_equal(np.isnan(found), nan)
        assert np.array_equal(found[~nan].view(np.uint16), expected[~nan].view(np.uint16))
