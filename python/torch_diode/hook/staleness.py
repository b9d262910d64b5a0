"""Model staleness (issue 54): is the model's data from the Inductor templates running now?

A model is trained on timings of Inductor's Triton GEMM templates (`triton_mm`,
`triton_bmm`) as one torch shipped them. model.json `provenance` (docs/model-format.md)
records the torch and Triton versions of its shards and, per template family, the sha256 of
the template sources (collect/fingerprint.template_hash). At install the hook compares them
with the running torch:

* a family whose running template hash is not among the model's: the model is not used for
  that family's GEMMs (mm/addmm for "mm", bmm/baddbmm for "bmm"); they take Inductor's default
  path (predict mode: the op's ATen kernel, cuBLAS), counted as passthrough "stale_template".
  One WARNING per family, naming the model's hashes and the running one;
* the same hash: used. Other torch / Triton versions with the same templates: used, INFO;
* no provenance (every bundle shipped before it), no hash recorded for a family, or a running
  template that cannot be read: used, INFO that staleness cannot be checked.

Inductor's own lookup table refuses entries whose template hash changed the same way.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

log = logging.getLogger("torch_diode")

# Template family -> the ops the hook chooses for with that family's Triton template.
FAMILY_OPS = {"mm": ("mm", "addmm"), "bmm": ("bmm", "baddbmm")}


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
    """The running torch's versions and template hashes (collect/fingerprint.template_hash,
    the collector's own function); a template that cannot be read is None."""
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
    for fam in FAMILY_OPS:
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
    out: list[Finding] = []
    templates = prov.get("templates") or {}
    unchecked = []
    for fam in FAMILY_OPS:
        have = templates.get(fam) or []
        now = run.templates.get(fam)
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
        why = ("the model records no template hash for it" if all(not templates.get(f) for f in unchecked)
               else "no template hash (model or running torch)")
        out.append(Finding(logging.INFO, f"torch_diode: template staleness cannot be checked for "
                                         f"{', '.join(unchecked)} ({why}); the model is used for it"))
    diffs = []
    for key, now in (("torch_versions", run.torch_version), ("triton_versions", run.triton_version)):
        have = prov.get(key) or []
        if have and now and now not in have:
            diffs.append(f"{key.split('_')[0]} {now} (model's data: {', '.join(have)})")
    if diffs:
        same = [f for f in FAMILY_OPS if f not in unchecked and not any(x.family == f for x in out)]
        out.append(Finding(logging.INFO, "torch_diode: running " + "; ".join(diffs) +
                           (f"; the {'/'.join(same)} template(s) are unchanged, the model is used for them"
                            if same else "")))
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
        for f in findings:
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
