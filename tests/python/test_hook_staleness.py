"""Model staleness (issue 54): model.json provenance against the running Inductor templates
(hook/staleness.py), and the handler passing a stale family's GEMMs through."""
import dataclasses
import json
import logging
import os

import pytest

torch = pytest.importorskip("torch")

from test_hook_model import write_model_dir  # noqa: E402
from test_hook_ranking import FakeMMInputs, M, N, K, finalize, make_choices  # noqa: E402
from test_hook_predict import fake_model  # noqa: E402
from torch_diode.collect.enumerate import mm_configs  # noqa: E402
from torch_diode.collect.fingerprint import template_hash, template_hashes  # noqa: E402
from torch_diode.hook import staleness  # noqa: E402
from torch_diode.hook.choices import HookState, choices_class  # noqa: E402
from torch_diode.hook.ranking import Options, Ranker  # noqa: E402
from torch_diode.hook.staleness import Running, check  # noqa: E402
from torch_diode.hook.stats import Stats  # noqa: E402
from torch_diode.model import ModelFormatError, load_model_dir  # noqa: E402

H_MM, H_BMM, H_OLD = "a" * 64, "b" * 64, "c" * 64
RUN = Running("2.13.0+cu130", "3.7.0", {"mm": H_MM, "bmm": H_BMM})


class Info:
    def __init__(self, provenance):
        self.provenance = provenance


def prov(mm=(H_MM,), bmm=(H_BMM,), torch_v=("2.13.0+cu130",), triton_v=("3.7.0",)):
    return {"torch_versions": list(torch_v), "triton_versions": list(triton_v),
            "templates": {"mm": list(mm), "bmm": list(bmm)}}


def test_same_template_hashes_the_model_is_used():
    assert check(Info(prov()), RUN) == []
    # one of several hashes of the data (shards of two torch builds) is enough
    assert check(Info(prov(mm=(H_OLD, H_MM))), RUN) == []


def test_changed_template_hash_one_warning_naming_family_and_hashes():
    fs = check(Info(prov(mm=(H_OLD,))), RUN)
    warn = [f for f in fs if f.level == logging.WARNING]
    assert len(warn) == 1 and warn[0].stale and warn[0].family == "mm"
    assert "'mm'" in warn[0].message and H_OLD[:16] in warn[0].message and H_MM[:16] in warn[0].message
    assert not any(f.stale for f in fs if f.family == "bmm")


def test_no_provenance_used_with_one_info():
    for p in (None, {}):
        fs = check(Info(p), RUN)
        assert len(fs) == 1 and fs[0].level == logging.INFO and not fs[0].stale
        assert "cannot be checked" in fs[0].message


def test_other_versions_same_templates_used_with_info():
    fs = check(Info(prov(torch_v=("2.11.0+cu130",), triton_v=("3.6.0",))), RUN)
    assert fs and all(f.level == logging.INFO and not f.stale for f in fs)
    assert "2.11.0+cu130" in fs[0].message and "3.6.0" in fs[0].message


def test_versions_only_provenance_cannot_check_templates():
    # what diode-train writes today: the shards carry no template hash
    p = {"torch_versions": ["2.13.0+cu130"], "triton_versions": ["3.7.0"]}
    fs = check(Info(p), RUN)
    assert len(fs) == 1 and fs[0].level == logging.INFO and not fs[0].stale and "mm, bmm" in fs[0].message


def test_running_hash_is_the_collectors_function():
    hs = template_hashes()
    assert set(hs) == {"mm", "bmm"} and all(len(h) == 64 for h in hs.values())
    r = staleness.running()
    # inductor_compat.template_hashes' names (what shards and model.json record), the same sources
    assert r.templates["triton_mm"] == hs["mm"] == template_hash("mm")
    assert r.templates["triton_bmm"] == hs["bmm"]
    assert r.torch_version == torch.__version__


def _model(tmp_path, provenance):
    def patch(j):
        if provenance is not None:
            j["provenance"] = provenance
    return load_model_dir(write_model_dir(str(tmp_path / "model"), json_patch=patch))


def test_model_json_provenance_parsed(tmp_path):
    m = _model(tmp_path, prov(mm=(H_OLD,)))
    assert m.info.provenance["templates"]["mm"] == [H_OLD] and m.info.meta["provenance"]
    assert m.stale_families is None
    bad = tmp_path / "bad"
    write_model_dir(str(bad), json_patch=lambda j: j.update(provenance={"templates": {"mm": ["xyz"]}}))
    with pytest.raises(ModelFormatError):
        load_model_dir(str(bad))
    assert _model(tmp_path / "none", None).info.provenance is None


def test_apply_warns_once_and_disables_the_family(tmp_path, caplog):
    m = _model(tmp_path, prov(mm=(H_OLD,)))
    with caplog.at_level(logging.INFO, logger="torch_diode"):
        assert staleness.apply(m, RUN) == frozenset({"mm"})
        assert staleness.apply(m, RUN) == frozenset({"mm"})  # re-activation: checked once
        assert staleness.disabled_ops(m) == frozenset({"mm", "addmm"})
    warns = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warns) == 1 and "'mm'" in warns[0].getMessage()


def test_apply_no_provenance_info_once(tmp_path, caplog):
    m = _model(tmp_path, None)
    with caplog.at_level(logging.INFO, logger="torch_diode"):
        assert staleness.apply(m, RUN) == frozenset()
        staleness.apply(m, RUN)
    recs = [r for r in caplog.records if "staleness" in r.getMessage()]
    assert len(recs) == 1 and recs[0].levelno == logging.INFO


@pytest.fixture(scope="module")
def real_configs():
    return mm_configs(M, N, K, 2, "DEFAULT")


@pytest.mark.parametrize("mode", ["predict", "topk"])
def test_stale_family_gemms_pass_through(tmp_path, real_configs, mode):
    # A model that would pick Triton (ATen predicted slow): with its mm template unchanged it
    # chooses; with the mm template changed Inductor gets ATen alone (predict: cuBLAS, what
    # plain torch.compile runs) or its own lists (top-k), counted as stale_template.
    loaded = _model(tmp_path, None)
    base = fake_model(loaded, **{"template__aten": 100.0, "log2_block_m": 1.0})
    aten, triton = make_choices(real_configs)
    lists = {"aten::mm": [aten], "triton::mm": triton}
    for p, stale in ((prov(), False), (prov(mm=(H_OLD,)), True)):
        m = dataclasses.replace(base, info=dataclasses.replace(base.info, provenance=p))
        staleness.apply(m, RUN)  # what install does (api._activate)
        state = HookState(Ranker(m), Options(mode=mode), Stats())
        out = finalize(choices_class()(state), dict(lists), FakeMMInputs(M, N, K))
        s = state.stats.snapshot()
        if not stale:
            assert s["model_selections"] == 1 and s["passthrough"] == {}
        else:
            assert s["model_selections"] == 0 and s["passthrough"] == {"stale_template": 1}
            if mode == "predict":
                assert out == [aten]
            else:
                assert out == [aten, *triton]


def test_stale_mm_leaves_bmm_to_the_model(tmp_path, real_configs):
    loaded = _model(tmp_path, None)
    base = fake_model(loaded, **{"template__aten": 100.0, "log2_block_m": 1.0})
    m = dataclasses.replace(base, info=dataclasses.replace(base.info, provenance=prov(mm=(H_OLD,))))
    staleness.apply(m, RUN)
    assert "bmm" not in staleness.disabled_ops(m) and "baddbmm" not in staleness.disabled_ops(m)


def test_unchecked_model_is_checked_at_first_gemm(tmp_path, real_configs, monkeypatch):
    # a compile subprocess reloads the model (choices.state_for) without install: the
    # handler checks it at its first GEMM
    monkeypatch.setattr(staleness, "running", lambda: RUN)
    loaded = _model(tmp_path, None)
    base = fake_model(loaded, **{"template__aten": 100.0, "log2_block_m": 1.0})
    m = dataclasses.replace(base, info=dataclasses.replace(base.info, provenance=prov(mm=(H_OLD,))))
    assert m.stale_families is None
    aten, triton = make_choices(real_configs)
    state = HookState(Ranker(m), Options(mode="predict"), Stats())
    out = finalize(choices_class()(state), {"aten::mm": [aten], "triton::mm": triton}, FakeMMInputs(M, N, K))
    assert out == [aten] and m.stale_families == frozenset({"mm"})
    assert state.stats.snapshot()["passthrough"] == {"stale_template": 1}


def test_install_checks_the_model(tmp_path, monkeypatch, caplog):
    from torch_diode.hook import api, compat
    try:
        compat.choices_base()
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"no hook on this torch: {e}")
    monkeypatch.setattr(staleness, "running", lambda: RUN)
    d = write_model_dir(str(tmp_path / "inst"), json_patch=lambda j: j.update(provenance=prov(bmm=(H_OLD,))))
    with caplog.at_level(logging.INFO, logger="torch_diode"):
        try:
            assert api.install(d, force=True)
            st = api.active_state()
            assert st.ranker.model.stale_families == frozenset({"bmm"})
        finally:
            api.uninstall()
    assert sum(1 for r in caplog.records if r.levelno == logging.WARNING and "'bmm'" in r.getMessage()) == 1
