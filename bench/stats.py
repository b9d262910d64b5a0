"""The bench scripts' statistics: torch_diode/summary_stats.py, the package's one definition
(geomean, quantile, p90, median, ratio), re-exported so that a bench script can `from stats
import geomean` with only bench/ on its path.

The module is loaded from its file, not as `torch_diode.summary_stats`: importing the package
imports torch and installs the hook (torch_diode/__init__.py), which a bench script that only
reads JSON must not pay for or trigger.
"""
from __future__ import annotations

import importlib.util
import os
import sys

_NAME = "torch_diode_summary_stats"
_PATH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                     "python", "torch_diode", "summary_stats.py")
if _NAME not in sys.modules:
    _spec = importlib.util.spec_from_file_location(_NAME, _PATH)
    _module = importlib.util.module_from_spec(_spec)
    sys.modules[_NAME] = _module
    _spec.loader.exec_module(_module)
_stats = sys.modules[_NAME]

geomean = _stats.geomean
quantile = _stats.quantile
p90 = _stats.p90
median = _stats.median
ratio = _stats.ratio

__all__ = ["geomean", "quantile", "p90", "median", "ratio"]
