"""The Inductor hook: model-ranked GEMM template selection for torch.compile(max-autotune).

Modules, one job each:
  api      public functions (install/uninstall, models, stats, options), re-exported by torch_diode
  choices  the InductorChoices subclass and the factory put into inductor_choices_class
  ranking  batched scoring with the model, top-k/threshold selection, prediction cache
  extract  Inductor KernelInputs / KernelTemplateChoice -> wire Problem / KernelConfig
  gemv     predict mode's M = 1 / N = 1 mm as Inductor's reduction with a measured launch config
  sources  model resolution: explicit path, DIODE_MODEL, hub (native client), local cache, package
  detect   GPU detection and hardware key
  compat   PyTorch-version differences (over torch_diode.inductor_compat)
  stats    counters and profile records
  _mlp     the residual_mlp torch module
"""
