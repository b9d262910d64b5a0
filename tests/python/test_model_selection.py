"""model.json `selection.aten_margin`: predict mode's ATen margin chosen for a model at release
(python/release/choose_aten_margin.py), parsed strictly, and in force in the hook unless the
user sets the aten_margin option."""
import dataclasses
import json
import math
import pathlib
import shutil
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

from model_tools import shipped_model  # noqa: E402
from test_hook_model import write_model_dir  # noqa: E402
from torch_diode.hook.choices import HookState, _aten_decision_score  # noqa: E402
from torch_diode.hook.ranking import DEFAULT_ATEN_MARGIN, Options, Ranker  # noqa: E402
from torch_diode.hook.stats import Stats  # noqa: E402
from torch_diode.model import ModelFormatError, load_model_dir, parse_selection  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_absent_selection_or_margin_is_none():
    assert parse_selection(None) is None and parse_selection({}) is None
    assert parse_selection({"bound": 1.1}) is None


@pytest.mark.parametrize("v", [0, 0.05, 0.1, 1.0])
def test_valid_margin(v):
    assert parse_selection({"aten_margin": v}) == float(v)


@pytest.mark.parametrize("sel", [
    [], "0.05", {"aten_margin": -0.01}, {"aten_margin": 1.5}, {"aten_margin": "0.05"},
    {"aten_margin": True}, {"aten_margin": None}, {"aten_margin": [0.05]},
    {"aten_margin": float("nan")}, {"aten_margin": float("inf")},
])
def test_malformed_selection_refuses_the_model(sel, tmp_path):
    with pytest.raises(ModelFormatError, match="selection"):
        parse_selection(json.loads(json.dumps(sel)))
    # a model directory with it does not load at all (refused with the rest of model.json)
    write_model_dir(tmp_path / "m", json_patch=lambda j: j.update(selection=sel))
    with pytest.raises(ModelFormatError, match="selection"):
        load_model_dir(tmp_path / "m")


def test_the_margin_in_force_is_the_option_else_the_models_else_the_default(tmp_path):
    write_model_dir(tmp_path / "plain")
    write_model_dir(tmp_path / "own", json_patch=lambda j: j.update(selection={"aten_margin": 0.15}))
    plain, own = load_model_dir(tmp_path / "plain"), load_model_dir(tmp_path / "own")
    assert plain.info.aten_margin is None and own.info.aten_margin == 0.15
    assert Options().aten_margin is None
    assert HookState(Ranker(plain), Options(), Stats()).aten_margin == DEFAULT_ATEN_MARGIN
    assert HookState(Ranker(own), Options(), Stats()).aten_margin == 0.15
    assert HookState(Ranker(own), Options(aten_margin=0.0), Stats()).aten_margin == 0.0  # the user's wins
    assert HookState(None, Options(), Stats()).aten_margin == DEFAULT_ATEN_MARGIN
    # the decision rule takes the margin in force: ATen's score lowered by log(1 + margin)
    assert _aten_decision_score(0.15, 1.0) == pytest.approx(1.0 - math.log(1.15))
    # the model's margin is in model.json, so in the model id, so in Inductor's cache key
    assert own.info.model_id != plain.info.model_id
    assert HookState(Ranker(own), Options(), Stats()).uuid() != HookState(Ranker(plain), Options(), Stats()).uuid()


def _h100_copy_and_split(tmp_path):
    """A writable copy of the shipped H100 model, one real dataset file and a split list of
    every problem in it (the list carries more fields than the key; only the key matters)."""
    sys.path.insert(0, str(ROOT / "bench"))
    import predict_aten_margin as pam
    src = shipped_model("nvidia-h100-80gb")
    model = tmp_path / "model"
    model.mkdir()
    for f in ("model.json", "weights.msgpack"):
        shutil.copy(src / f, model / f)
    data = ROOT / "datasets/nvidia-h100-80gb/2026-11-25-mix-2026112507-p004-015.msgpack.gz"
    split = tmp_path / "val.json"
    split.write_text(json.dumps([dict(dataclasses.asdict(p), configs=[], us=[], problem="0" * 16)
                                 for p, _ in pam.problems_of([str(data)])]))
    return src, model, data, split


def test_choose_aten_margin_writes_the_validation_choice_into_model_json(tmp_path):
    """The release step on the shipped H100 model and one real dataset file: the margin
    written is bench/aten_margin_choice.py's choice for this one model (one definition), the
    rest of model.json is unchanged, and the model reads back with it."""
    src, model, data, split = _h100_copy_and_split(tmp_path)
    import aten_margin_choice as amc
    import predict_aten_margin as pam
    cmd = [sys.executable, str(ROOT / "python/release/choose_aten_margin.py"), "--model", str(model),
           "--dataset", str(data), "--split-list", str(split)]
    rows = pam.replay_rows(load_model_dir(str(src)), [str(data)], pam.read_split_list(str(split)), 0.5)
    table = [pam.margin_row(rows, m) for m in pam.MARGINS]
    expect = amc.choose({"m": table}, 1.5)
    assert expect is not None
    r = subprocess.run(cmd + ["--bound", "1.5"], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    written = json.loads((model / "model.json").read_text())
    sel = written.pop("selection")
    assert sel["aten_margin"] == expect and sel["bound"] == 1.5 and sel["problems"] == len(rows)
    assert sel["vs_cublas_max"] == pytest.approx(table[pam.MARGINS.index(expect)]["vs_cublas_max"], abs=1e-6)
    before = json.loads((src / "model.json").read_text())
    before.pop("selection", None)   # a shipped model may carry its own (release step 2b)
    assert written == before  # nothing else changed
    assert load_model_dir(model).info.aten_margin == expect
    # a bound that no margin of the grid meets: exit 1 and model.json as it was
    before = (model / "model.json").read_bytes()
    if table[-1]["vs_cublas_max"] > 1.0:
        r = subprocess.run(cmd + ["--bound", "1.0"], capture_output=True, text=True)
        assert r.returncode == 1 and "model.json not changed" in r.stderr
        assert (model / "model.json").read_bytes() == before


def test_choose_aten_margin_for_the_every_member_rule_writes_that_rule(tmp_path):
    """--rule every_member: the margin is the choice of the every_member replay (each member
    of the shipped H100 ensemble alone), and selection.aten_rule carries the rule, which the
    hook then uses (HookState.aten_rule)."""
    src, model, data, split = _h100_copy_and_split(tmp_path)
    import aten_margin_choice as amc
    import predict_aten_margin as pam
    rows = pam.replay_rows(load_model_dir(str(src)), [str(data)], pam.read_split_list(str(split)), 0.5, members=True)
    expect = amc.choose({"m": [pam.margin_row(rows, m, "every_member") for m in pam.MARGINS]}, 1.5)
    assert expect is not None
    r = subprocess.run([sys.executable, str(ROOT / "python/release/choose_aten_margin.py"), "--model", str(model),
                        "--dataset", str(data), "--split-list", str(split), "--bound", "1.5",
                        "--rule", "every_member"], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "(every_member rule)" in r.stdout
    sel = json.loads((model / "model.json").read_text())["selection"]
    assert sel["aten_rule"] == "every_member" and sel["aten_margin"] == expect
    loaded = load_model_dir(model)
    assert loaded.info.aten_rule == "every_member"
    assert HookState(Ranker(loaded), Options(), Stats()).aten_rule == "every_member"
