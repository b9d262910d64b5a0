"""One InductorChoices subclass factory (issue 15): the collector's make_choices_class and
the hook's choices_class are both built by inductor_compat.choices_subclass, and no module
but inductor_compat reads a private attribute of an Inductor object."""
import pathlib
import re

import pytest

torch = pytest.importorskip("torch")

from torch_diode import inductor_compat as ic  # noqa: E402
from torch_diode.hook import choices as hook_choices  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2] / "python" / "torch_diode"


def test_collector_and_hook_classes_come_from_the_one_factory(monkeypatch):
    from torch._inductor.choices import InductorChoices

    made = []
    real = ic.choices_subclass

    def spy(finalize, base=None, **kw):
        cls = real(finalize, base, **kw)
        made.append(cls)
        return cls

    monkeypatch.setattr(ic, "choices_subclass", spy)
    collector = ic.make_choices_class(lambda ktcs, inputs, op: ktcs)

    class Base(InductorChoices):  # a fresh base: choices_class caches per base
        pass

    hook = hook_choices.choices_class(Base)
    assert made == [collector, hook]
    for cls in made:
        assert cls._diode_choices_factory == "inductor_compat.choices_subclass"
        assert ic.finalize_hook_name(cls) in cls.__dict__  # the override is on the class itself
    assert issubclass(hook, hook_choices.DiodeChoicesMixin) and issubclass(hook, Base)


def test_factory_passes_parent_and_arguments():
    class Base:
        def _finalize_template_configs(self, template_choices, kernel_inputs, templates, op_name):
            return [k for g in template_choices.values() for k in g]

    seen = []

    def finalize(self, parent, args, kwargs):
        seen.append(ic.bind_finalize_args(parent, args, kwargs)["op_name"])
        return parent(self, *args, **kwargs)[::-1]

    cls = ic.choices_subclass(finalize, Base, name="X", namespace={"uuid": lambda self: "u"})
    out = cls()._finalize_template_configs({"a": iter([1, 2, 3])}, None, [], op_name="mm")
    assert out == [3, 2, 1] and seen == ["mm"] and cls().uuid() == "u"
    assert cls._diode_base_finalize is Base._finalize_template_configs


# getattr/hasattr of a private name, or `<inductor object>._name`
_PRIVATE = re.compile(r"""(?:getattr|hasattr)\(\s*[\w.]+\s*,\s*["']_[a-z]\w*["']"""
                      r"""|\b(?:ktc|kernel_inputs|choice|template|layout|node|inputs|handler)\._[a-z]\w*""")


def test_no_private_inductor_attribute_read_outside_inductor_compat():
    offenders = []
    for path in sorted(ROOT.rglob("*.py")):
        if path.name == "inductor_compat.py":
            continue
        for i, line in enumerate(path.read_text().splitlines(), 1):
            if _PRIVATE.search(line.split("#")[0]):
                offenders.append(f"{path.relative_to(ROOT)}:{i}: {line.strip()}")
    assert not offenders, "\n".join(offenders)
