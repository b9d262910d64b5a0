"""install()/uninstall(): exact restore of Inductor's handler and config, cache keys,
version checks, and side-effect-free imports."""
import os
import pickle
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

import torch_diode  # noqa: E402
from test_hook_model import write_model_dir  # noqa: E402
from torch._inductor import config as inductor_config  # noqa: E402
from torch._inductor.choices import InductorChoices  # noqa: E402
from torch._inductor.virtualized import V  # noqa: E402
from torch_diode.hook import api, compat  # noqa: E402
from torch_diode.hook.choices import ChoicesFactory, DiodeChoicesMixin  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture
def clean():
    """No diode install, no cached handler in this thread; restores whatever was there."""
    api.uninstall()
    cfg, tl = compat.get_choices_config(), compat.thread_handler()
    compat.set_thread_handler(compat.MISSING)
    inductor_config.inductor_choices_class = None
    yield
    api.uninstall()
    inductor_config.inductor_choices_class = cfg
    compat.set_thread_handler(tl)


@pytest.fixture(scope="module")
def model_dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("models")
    return write_model_dir(str(root / "a"), seed=1), write_model_dir(str(root / "b"), seed=2)


def test_install_uninstall_restores_cached_default_handler(clean, model_dirs):
    default = V.choices  # Inductor builds and caches a plain InductorChoices in this thread
    assert type(default) is InductorChoices and compat.thread_handler() is default
    assert torch_diode.install(model_dirs[0]) is True
    assert isinstance(inductor_config.inductor_choices_class, ChoicesFactory)
    handler = V.choices  # rebuilt from the config: ours now
    assert isinstance(handler, DiodeChoicesMixin) and isinstance(handler, InductorChoices)
    assert torch_diode.is_installed()
    assert torch_diode.uninstall() is True
    assert inductor_config.inductor_choices_class is None
    assert compat.thread_handler() is default
    assert torch_diode.uninstall() is False


def test_install_refuses_foreign_handler_unless_forced(clean, model_dirs):
    class UserChoices(InductorChoices):
        def uuid(self):
            return "user"

    def user_factory():
        return UserChoices()

    inductor_config.inductor_choices_class = user_factory
    with pytest.raises(RuntimeError, match="another InductorChoices handler"):
        torch_diode.install(model_dirs[0])
    assert inductor_config.inductor_choices_class is user_factory and not torch_diode.is_installed()
    assert torch_diode.install(model_dirs[0], force=True)
    assert isinstance(V.choices, DiodeChoicesMixin)
    torch_diode.uninstall()
    assert inductor_config.inductor_choices_class is user_factory
    assert compat.thread_handler() is compat.MISSING
    assert type(V.choices) is UserChoices


def test_thread_handler_mode_when_config_is_absent(clean, model_dirs, monkeypatch):
    monkeypatch.setattr(compat, "has_choices_config", lambda: False)
    prior = InductorChoices()
    compat.set_thread_handler(prior)
    torch_diode.install(model_dirs[0])
    assert isinstance(compat.thread_handler(), DiodeChoicesMixin)
    assert inductor_config.inductor_choices_class is None  # config untouched in this mode
    torch_diode.uninstall()
    assert compat.thread_handler() is prior


def test_uuid_changes_with_model_and_options(clean, model_dirs):
    torch_diode.install(model_dirs[0], top_k=5)
    u1 = inductor_config.inductor_choices_class.uuid()
    assert V.choices.uuid() == u1
    # the key Inductor's FX graph cache uses (calls the factory, then uuid())
    portable = inductor_config.save_config_portable()
    if "inductor_choices_class" in portable:
        assert portable["inductor_choices_class"] == u1
    # older torch pickles the config instead: the pickle carries the uuid too
    assert u1.encode() in pickle.dumps(inductor_config.inductor_choices_class)
    torch_diode.set_options(top_k=3)
    u2 = inductor_config.inductor_choices_class.uuid()
    torch_diode.install(model_dirs[1], top_k=3)
    u3 = inductor_config.inductor_choices_class.uuid()
    torch_diode.set_options(top_k=5)
    torch_diode.install(model_dirs[0])
    u4 = inductor_config.inductor_choices_class.uuid()
    assert len({u1, u2, u3}) == 3 and u4 == u1


def test_unpickled_factory_reloads_the_same_model(clean, model_dirs):
    torch_diode.install(model_dirs[0], top_k=4)
    f = inductor_config.inductor_choices_class
    g = pickle.loads(pickle.dumps(f))
    assert g.uuid() == f.uuid() and g.state.ranker is not None
    torch_diode.set_options(top_k=5)


def test_old_torch_gets_a_clear_message(clean, model_dirs, monkeypatch):
    for name in ("_finalize_template_configs", "_finalize_mm_configs"):
        monkeypatch.delattr(InductorChoices, name, raising=False)
    with pytest.raises(compat.UnsupportedTorch, match="_finalize_template_configs"):
        torch_diode.install(model_dirs[0])
    monkeypatch.setenv("DIODE_MODEL", model_dirs[0])
    assert api.auto_install() is False  # import path: logged, not raised
    assert inductor_config.inductor_choices_class is None


def _run(code, **env):
    e = {k: v for k, v in os.environ.items() if not k.startswith(("DIODE_", "TORCH_DIODE_"))}
    e.update(env)
    e["PYTHONPATH"] = os.path.join(ROOT, "python") + os.pathsep + e.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=e, timeout=120)


def test_import_without_gpu_or_model_is_harmless_and_auto_installs_with_model(model_dirs):
    code = ("import logging, sys; logging.basicConfig(level=logging.INFO)\n"
            "import torch_diode\n"
            "cfg = sys.modules.get('torch._inductor.config')\n"
            "print('INSTALLED', torch_diode.is_installed(),\n"
            "      type(cfg.inductor_choices_class).__name__ if cfg else 'inductor-not-imported')\n")
    r = _run(code)
    assert r.returncode == 0, r.stderr
    assert "INSTALLED False inductor-not-imported" in r.stdout  # Inductor not even imported
    assert "torch_diode" not in r.stderr  # nothing logged above debug
    r = _run(code, DIODE_MODEL=model_dirs[0])
    assert r.returncode == 0, r.stderr
    assert "INSTALLED True ChoicesFactory" in r.stdout


def test_auto_install_can_be_switched_off(clean, model_dirs, monkeypatch):
    monkeypatch.setenv("DIODE_MODEL", model_dirs[0])
    monkeypatch.setenv("TORCH_DIODE_AUTO_INSTALL", "0")
    torch_diode._auto_install()  # what `import torch_diode` runs
    assert not torch_diode.is_installed() and inductor_config.inductor_choices_class is None
    monkeypatch.setenv("TORCH_DIODE_AUTO_INSTALL", "1")
    torch_diode._auto_install()
    assert torch_diode.is_installed()


def test_wire_and_features_import_without_torch():
    r = _run("import sys; sys.modules['torch'] = None\n"
             "import torch_diode.wire, torch_diode.features\n"
             "assert 'torch_diode.hook.api' not in sys.modules\n"
             "print('OK', torch_diode.__version__)")
    assert r.returncode == 0, r.stderr
    assert "OK" in r.stdout


def test_hardware_key_override(monkeypatch):
    """DIODE_HARDWARE_KEY names the key explicitly; a malformed one is ignored."""
    from torch_diode.hook import api
    monkeypatch.setenv("DIODE_HARDWARE_KEY", "nvidia-h100-80gb")
    hw = api.get_detected_hardware(refresh=True)
    assert hw["hardware_key"] == "nvidia-h100-80gb"
    assert hw["hardware_key_source"] == "DIODE_HARDWARE_KEY"
    monkeypatch.setenv("DIODE_HARDWARE_KEY", "../etc")
    assert api.get_detected_hardware(refresh=True).get("hardware_key_source") != "DIODE_HARDWARE_KEY"
    monkeypatch.delenv("DIODE_HARDWARE_KEY")
    api.get_detected_hardware(refresh=True)
