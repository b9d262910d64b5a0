"""What a PyTorch user sees of the package (issue 17): dir() shows the lazy API, the stats
carry totals and a confidence figure, search_space takes any case, and the distribution
has a license and says it replaces the seed's torch-diode."""
import math
import os
import pathlib
import pickle
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

import torch_diode  # noqa: E402
from test_hook_fallbacks import hook  # noqa: E402,F401
from test_hook_model import write_model_dir  # noqa: E402
from test_hook_ranking import FakeMMInputs, finalize, make_choices, reference_scores  # noqa: E402
from torch._inductor import config as inductor_config  # noqa: E402
from torch._inductor.virtualized import V  # noqa: E402
from torch_diode.collect.enumerate import mm_configs  # noqa: E402
from torch_diode.hook import api, extract  # noqa: E402
from torch_diode.hook.choices import HookState  # noqa: E402
from torch_diode.hook import ranking  # noqa: E402
from torch_diode.hook.ranking import Options  # noqa: E402
from torch_diode.wire import KernelConfig, Problem  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]


# ---------------------------------------------------------------- dir()

def test_dir_lists_the_lazy_public_api():
    names = dir(torch_diode)
    for name in torch_diode.__all__:
        assert name in names, name
        assert callable(getattr(torch_diode, name)) or name == "__version__"
    assert names == sorted(names)


def test_dir_needs_no_torch():
    # dir() must not import the hook: `import torch_diode.wire` users may have no torch
    code = ("import sys; sys.modules['torch'] = None\n"
            "import torch_diode\n"
            "assert 'install' in dir(torch_diode) and 'get_prediction_stats' in dir(torch_diode)\n"
            "assert 'torch_diode.hook.api' not in sys.modules\n"
            "print('OK')")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DIODE_", "TORCH_DIODE_"))}
    env["PYTHONPATH"] = str(ROOT / "python") + os.pathsep + env.get("PYTHONPATH", "")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0 and "OK" in r.stdout, r.stderr


# ---------------------------------------------------------------- stats

def test_top_margin():
    top_margin = ranking.top_margin
    a, b, c = (KernelConfig(block_m=x) for x in (16, 32, 64))
    assert top_margin([1.0, 1.5, 2.0], [a, b, c]) == pytest.approx(math.expm1(0.5))
    # the same config from two templates is one candidate, not a runner-up at margin 0
    assert top_margin([1.0, 1.0, 1.25], [a, a, b]) == pytest.approx(math.expm1(0.25))
    assert top_margin([1.0, 1.0], [a, a]) is None and top_margin([1.0], [a]) is None
    assert top_margin([0.0, 1e6], [a, b]) == pytest.approx(math.expm1(ranking.MAX_LOG_MARGIN))  # capped, finite


def _margin_reference(model, m, n, k, triton):
    scores = reference_scores(model, Problem(op="mm", m=m, n=n, k=k), triton)
    best = {}
    for ktc, s in zip(triton, scores):
        cfg = extract.config_from_ktc(ktc)
        best[cfg] = min(s, best.get(cfg, math.inf))
    s1, s2 = sorted(best.values())[:2]
    return math.expm1(s2 - s1)


def test_prediction_stats_totals_and_confidence(hook, monkeypatch):
    d = write_model_dir(str(hook / "m"))
    assert torch_diode.install(d, top_k=3, threshold=0.0)
    model = api.active_state().ranker.model
    shapes = [(256, 512, 1024), (64, 64, 64), (256, 512, 1024)]  # the last one is a cache hit
    expected = []
    with torch_diode.profile_predictions() as recs:
        for m, n, k in shapes:
            aten, triton = make_choices(mm_configs(m, n, k, 2, "DEFAULT"))
            finalize(V.choices, {"aten::mm": [aten], "triton::mm": triton}, FakeMMInputs(m, n, k))
            expected.append(_margin_reference(model, m, n, k, triton))
        aten, triton = make_choices(mm_configs(64, 64, 64, 2, "DEFAULT"))
        finalize(V.choices, {"aten::mm": [aten], "triton::mm": triton}, FakeMMInputs(64, 64, 64),
                 op="mm_plus_mm")  # passthrough: neither a prediction nor a fallback
        api.active_state().ranker.clear_cache()
        monkeypatch.setattr(model.module, "forward", lambda x: torch.full((x.shape[0],), float("nan")))
        finalize(V.choices, {"aten::mm": [aten], "triton::mm": triton}, FakeMMInputs(64, 64, 64))
    s = torch_diode.get_prediction_stats()
    assert s["total_calls"] == s["calls"] == 5
    assert s["total_predictions"] == s["model_selections"] == 3
    assert s["total_fallbacks"] == sum(s["fallbacks"].values()) == 1
    assert s["configs_filtered"] == s["configs_seen"] - s["configs_kept"] > 0
    margins = [r.margin for r in recs if r.outcome == "model"]
    assert margins == pytest.approx(expected)
    assert s["confidence"] == pytest.approx(sum(expected) / 3)
    torch_diode.reset_prediction_stats()
    s = torch_diode.get_prediction_stats()
    assert s["confidence"] is None and s["total_predictions"] == s["total_fallbacks"] == 0


# ---------------------------------------------------------------- search_space

@pytest.mark.parametrize("space,norm", [("EXHAUSTIVE", "exhaustive"), ("Exhaustive", "exhaustive"),
                                        ("exhaustive", "exhaustive"), ("DEFAULT", "default"),
                                        (" default ", "default")])
def test_search_space_any_case(space, norm):
    assert Options(search_space=space).search_space == norm
    assert Options(search_space=space) == Options(search_space=norm)  # same options, same cache key
    assert Options(search_space=space).key() == Options(search_space=norm).key()


@pytest.mark.parametrize("bad", ["fast", "", None, 1])
def test_search_space_rejects_anything_else(bad):
    with pytest.raises(ValueError, match=r"search_space must be 'default' or 'exhaustive' \(any case"):
        Options(search_space=bad)


def test_install_and_set_options_take_manifest_spelling(hook):
    d = write_model_dir(str(hook / "m"))
    assert torch_diode.install(d, search_space="exhaustive")
    u = inductor_config.inductor_choices_class.uuid()
    assert torch_diode.install(d, search_space="EXHAUSTIVE")
    assert torch_diode.get_options()["search_space"] == "exhaustive"
    assert inductor_config.inductor_choices_class.uuid() == u
    assert api.active_state().options.search_space == "exhaustive"  # what the handler tests for
    # a compile subprocess rebuilds the factory from pickled options
    assert pickle.loads(pickle.dumps(inductor_config.inductor_choices_class)).uuid() == u
    assert torch_diode.set_options(search_space="DEFAULT")["search_space"] == "default"
    with pytest.raises(ValueError, match="search_space"):
        torch_diode.set_options(search_space="HUGE")
    with pytest.raises(ValueError, match="search_space"):
        torch_diode.install(d, search_space="HUGE")
    assert torch_diode.get_options()["search_space"] == "default"  # a refused value changes nothing
    assert HookState(None, Options(search_space="EXHAUSTIVE")).uuid() == \
        HookState(None, Options(search_space="exhaustive")).uuid()


# ---------------------------------------------------------------- distribution

def test_distribution_metadata_and_license():
    import tomllib
    meta = tomllib.loads((ROOT / "python" / "pyproject.toml").read_text())["project"]
    assert meta["name"] == "torch-diode-fleet" and meta["license"] == "BSD-3-Clause"
    assert "torch-diode" in meta["description"]  # says it replaces the seed
    lic = (ROOT / "LICENSE").read_text()
    assert lic.startswith("BSD 3-Clause License") and "diode fleet authors" in lic
    setuptools_cfg = pytest.importorskip("setuptools.config.pyprojecttoml")
    # setuptools validates the table (an SPDX `license` needs setuptools >= 77)
    assert setuptools_cfg.read_configuration(str(ROOT / "python" / "pyproject.toml"))["project"]["license"] \
        == "BSD-3-Clause"


def test_hook_doc_says_how_to_replace_the_seed():
    doc = (ROOT / "docs" / "hook.md").read_text()
    assert "pip uninstall -y torch-diode torch-diode-fleet" in doc
    assert "`torch-diode-fleet`" in doc and "BSD-3-Clause" in doc
