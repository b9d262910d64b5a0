"""The `diode` command does not auto-install the Inductor hook: `python -m torch_diode
models list` and the `diode` console script import neither torch nor torch._inductor,
while a plain `import torch_diode` still runs the auto-install (which imports torch)."""
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _env():
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT / "python")
    env.pop("TORCH_DIODE_AUTO_INSTALL", None)  # the default: auto-install on
    return env


def _imported_modules(importtime_stderr: str) -> set[str]:
    """Module names from `python -X importtime` output ("import time: self | cumulative | name")."""
    names = set()
    for line in importtime_stderr.splitlines():
        if line.startswith("import time:") and line.count("|") == 2:
            name = line.rsplit("|", 1)[1].strip()
            if name != "imported package":
                names.add(name)
    return names


def _run_importtime(args, cwd):
    r = subprocess.run([sys.executable, "-X", "importtime", *args], capture_output=True, text=True,
                       env=_env(), cwd=cwd, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stdout, _imported_modules(r.stderr)


def test_python_m_torch_diode_models_list_imports_no_torch(tmp_path):
    _, mods = _run_importtime(["-m", "torch_diode", "models", "list"], tmp_path)
    assert "torch_diode.cli" in mods
    assert "torch" not in mods and "torch._inductor" not in mods, sorted(m for m in mods if m.startswith("torch."))
    assert "torch_diode.hook.api" not in mods


def test_console_script_models_list_imports_no_torch(tmp_path):
    # The script pip writes for `diode = torch_diode.cli:main`.
    script = tmp_path / "diode"
    script.write_text("import re\nimport sys\nfrom torch_diode.cli import main\n"
                      "if __name__ == '__main__':\n"
                      "    sys.argv[0] = re.sub(r'(-script\\.pyw|\\.exe)?$', '', sys.argv[0])\n"
                      "    sys.exit(main())\n")
    _, mods = _run_importtime([str(script), "models", "list"], tmp_path)
    assert "torch_diode.cli" in mods
    assert "torch" not in mods and "torch._inductor" not in mods


def test_plain_import_still_auto_installs(tmp_path):
    # Control: outside the CLI the auto-install runs and loads the hook (and torch).
    r = subprocess.run([sys.executable, "-c", "import sys, torch_diode; "
                        "print('torch_diode.hook.api' in sys.modules, 'torch' in sys.modules)"],
                       capture_output=True, text=True, env=_env(), cwd=tmp_path, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split() == ["True", "True"]
