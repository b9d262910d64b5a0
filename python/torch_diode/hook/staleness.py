"""Model staleness (issue 54): is the model's data from the Inductor templates running now?

A model is trained on timings of Inductor's Triton GEMM templates (`triton_mm`,
`triton_bmm`) as one torch shipped them. model.json `provenance` (docs/model-format.md)
records the torch and Triton versions of its shards and, per template name, the sha256 of
the template source (an array of hashes, or one hash: the shards' `templates`). At install
the hook compares them with the running torch's (inductor_compat.template_hashes where this
build has it, else the sha256 of inductor_compat.gemm_template_source of "mm" and "bmm"):

* GEMM model: a template whose running hash is not among the model's: the model is not used
  for that template's GEMMs (mm/addmm for "mm", bmm/baddbmm for "bmm"); they take Inductor's
  default path (predict mode: the op's ATen kernel, cuBLAS), counted as passthrough
  "stale_template". One WARNING per template, naming the model's hashes and the running one;
* a model of another decision family (model.json "family", e.g. scaled_mm): any template it
  records whose running hash differs makes the whole model unused for that family's ops
  (scaled_mm: ATen's `_scaled_mm`, cuBLASLt), one WARNING naming the template;
* the same hash: used. Other torch / Triton versions with the same templates: used, INFO;
* no provenance (every bundle shipped before it), no hash recorded for a template, or a running
  template that cannot be read: used, INFO that staleness cannot be checked.

Inductor's own lookup table refuses entries whose template hash changed the same way.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

log = logging.getLogger("torch_diode")

# Template family -> the ops the hook chooses for with that family's Triton template
# (GEMM model), and decision family -> its ops for the models of the other families.
FAMILY_OPS = {"mm": ("mm", "addmm"), "bmm": ("bmm", "baddbmm"), "scaled_mm": ("scaled_mm",)}
# the GEMM model's template families (what a GEMM model is checked per)
GEMM_TEMPLATES = ("mm", "bmm")
# one template, two names: the family of collect/fingerprint.template_hash and the template
# name of inductor_compat.template_hashes (what shards, and so model.json, record)
_ALIASES = {"mm": "triton_mm", "bmm": "triton_bmm", "triton_mm": "mm", "triton_bmm": "bmm"}


def _get(d: dict, name: str) -> Any:
    """d[name], else d under the template's other name (mm / triton_mm), else None."""
    v = d.get(name)
    return v if v is not None else d.get(_ALIASES.get(name, ""))


def model_family(model_info: Any) -> str:
    """The decision family of a model (model.json "family", in its feature spec; absent: gemm)."""
    spec = getattr(model_info, "feature_spec", None)
    return getattr(spec, "family", None) or getattr(model_info, "family", None) or "gemm"


def _hashes(v: Any) -> list[str]:
    """A provenance.templates entry: an array of sha256 hex strings, or one such string."""
    if isinstance(v, str):
        return [v]
    return [h for h in (v or []) if isinstance(h, str)]


@dataclass(frozen=True)
class Finding:
    level: int                 # logging.INFO or logging.WARNING
    message: str
    family: str | None = None  # the template family it is about; None: the model as a whole
    stale: bool = False        # True: the model is not used for `family`'s GEMMs


@dataclass(frozen=True)
class Running:
    """What the running torch has: versions and {family: template sha256 hex or None}."""
    torch_version: str | None
    triton_version: str | None
    templates: dict[str, str | None]


def running() -> Running:
    """The running torch's versions and template hashes (inductor_compat.template_hashes,
    the collector's; without it collect/fingerprint.template_hash of mm and bmm); a template
    that cannot be read is None."""
    from .. import inductor_compat as ic
    from ..collect.fingerprint import template_hash
    tv = trv = None
    try:
        import torch
        tv = str(torch.__version__)
    except Exception:
        pass
    try:
        import triton
        trv = str(triton.__version__)
    except Exception:
        pass
    templates: dict[str, str | None] = {}
    every = getattr(ic, "template_hashes", None)
    if every is not None:
        try:
            templates.update({str(k): (str(v) if v else None) for k, v in dict(every()).items()})
        except Exception as e:  # an unsupported torch: hash mm and bmm one by one below
            log.debug("torch_diode: cannot read Inductor's template hashes: %s", e)
    for fam in GEMM_TEMPLATES:
        if _get(templates, fam) is not None:
            continue
        try:
            templates[fam] = template_hash(fam)
        except Exception as e:  # an unsupported torch: cannot check, never break install
            log.debug("torch_diode: cannot read Inductor's %s template: %s", fam, e)
            templates[fam] = None
    return Running(tv, trv, templates)


def _short(hashes) -> str:
    return ", ".join(h[:16] for h in hashes) if hashes else "none"


def check(model_info: Any, run: Running) -> list[Finding]:
    """Compares a model's provenance (model_info.provenance: model.ModelInfo, or anything with
    that attribute) with `run`; returns the findings, at most one WARNING per stale family."""
    prov = getattr(model_info, "provenance", None)
    if not prov:
        return [Finding(logging.INFO, "torch_diode: the model records no provenance (model.json provenance: "
                                      "torch, Triton and template versions of its data); staleness cannot be "
                                      "checked, the model is used")]
    family = model_family(model_info)
    if family != "gemm":
        return _check_family(family, prov, run)
    out: list[Finding] = []
    templates = prov.get("templates") or {}
    unchecked = []
    for fam in GEMM_TEMPLATES:
        have = _hashes(_get(templates, fam))
        now = _get(run.templates, fam)
        if not have or now is None:
            unchecked.append(fam)
            continue
        if now not in have:
            out.append(Finding(
                logging.WARNING,
                f"torch_diode: Inductor's '{fam}' GEMM template changed since the model's data was collected "
                f"(model: {_short(have)}; running torch {run.torch_version}: {now[:16]}); the model is not used "
                f"for {'/'.join(FAMILY_OPS[fam])}: those GEMMs take Inductor's default path", fam, True))
    if unchecked:
        why = ("the model records no template hash for it" if all(not _get(templates, f) for f in unchecked)
               else "no template hash (model or running torch)")
        out.append(Finding(logging.INFO, f"torch_diode: template staleness cannot be checked for "
                                         f"{', '.join(unchecked)} ({why}); the model is used for it"))
    diffs = []
    for key, now in (("torch_versions", run.torch_version), ("triton_versions", run.triton_version)):
        have = prov.get(key) or []
        if have and now and now not in have:
            diffs.append(f"{key.split('_')[0]} {now} (model's data: {', '.join(have)})")
    if diffs:
        same = [f for f in GEMM_TEMPLATES if f not in unchecked and not any(x.family == f for x in out)]
        out.append(Finding(logging.INFO, "torch_diode: running " + "; ".join(diffs) +
                           (f"; the {'/'.join(same)} template(s) are unchanged, the model is used for them"
                            if same else "")))
    return out


def _check_family(family: str, prov: dict, run: Running) -> list[Finding]:
    """check() of a model of decision family `family` (not gemm): every template its data
    records is compared; one changed template makes the model unused for the family's ops."""
    templates = prov.get("templates") or {}
    ops = "/".join(FAMILY_OPS.get(family, (family,)))
    if not templates:
        return [Finding(logging.INFO, f"torch_diode: the {family} model records no template hashes (model.json "
                                      f"provenance.templates); template staleness cannot be checked, the model "
                                      f"is used for {ops}")]
    out: list[Finding] = []
    unchecked = []
    for name in sorted(templates):
        have, now = _hashes(templates[name]), _get(run.templates, name)
        if not have or now is None:
            unchecked.append(name)
        elif now not in have:
            out.append(Finding(
                logging.WARNING,
                f"torch_diode: Inductor's '{name}' template changed since the {family} model's data was collected "
                f"(model: {_short(have)}; running torch {run.torch_version}: {now[:16]}); the {family} model is "
                f"not used for {ops}: those take Inductor's default path", family, True))
    if unchecked:
        out.append(Finding(logging.INFO, f"torch_diode: template staleness of the {family} model cannot be checked "
                                         f"for {', '.join(unchecked)} (no hash in the model or the running torch)"))
    return out


def apply(model: Any, run: Running | None = None) -> frozenset:
    """Checks a loaded model once (model.stale_families: None until then) and logs the
    findings; returns the stale families. Never raises: a failed check leaves the model used."""
    if model is None:
        return frozenset()
    done = getattr(model, "stale_families", None)
    if done is not None:
        return done
    stale: frozenset = frozenset()
    try:
        findings = check(model.info, run if run is not None else running())
        from .state import PROCESS
        for f in findings:
            # A WARNING once per process and message: a model reloaded (import, then install) is checked
            # again, but its finding is said once.
            key = ("staleness", f.message)
            if f.level >= logging.WARNING:
                with PROCESS.lock:
                    if key in PROCESS.warned:
                        continue
                    PROCESS.warned.add(key)
            log.log(f.level, "%s", f.message)
        stale = frozenset(f.family for f in findings if f.stale)
    except Exception as e:
        log.info("torch_diode: model staleness not checked: %s: %s", type(e).__name__, e)
    model.stale_families = stale
    return stale


def disabled_ops(model: Any) -> frozenset:
    """The ops the model is not used for (those of its stale families); checks it first if
    install did not (a compile subprocess that reloaded the model)."""
    fams = apply(model)
    return frozenset(op for fam in fams for op in FAMILY_OPS.get(fam, ()))
