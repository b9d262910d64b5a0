"""The Inductor hook: model-ranked GEMM template selection for torch.compile(max-autotune).

Modules, one job each:
  api      public functions (install/uninstall, models, stats, options), re-exported by torch_diode
  choices  the InductorChoices subclass (its override points in its docstring), HookState and
           the factory put into inductor_choices_class
  state    the process state (PROCESS: options, counters, registered models, the installed
           HookState, detected hardware, GEMV plans), one lock; below choices and gemv
  protocols  the Ranker protocol: what the handler calls on a ranker
  ranking  batched scoring with the model (ranking.Ranker), top-k/threshold selection, prediction cache
  extract  Inductor KernelInputs / KernelTemplateChoice -> wire Problem / KernelConfig
  gemv     predict mode's M = 1 / N = 1 mm as Inductor's reduction with a measured launch config
  sources  model resolution: explicit path, DIODE_MODEL, hub (native client), local cache, package
  detect   GPU detection and hardware key
  compat   PyTorch-version differences (over torch_diode.inductor_compat)
  stats    counters and profile records
  zero_config  the model's choice under plain torch.compile (GEMM lowerings engaged one at a time)
  contribute   TORCH_DIODE_CONTRIBUTE: Inductor's timings of what the hook offers, recorded
  _mlp     the residual_mlp torch module

Imports go down only: api > choices > gemv > state > (ranking, stats, detect, zero_config, ...);
tests/python/test_hook_layering.py checks it (no cycle, none hidden inside a function).
"""
