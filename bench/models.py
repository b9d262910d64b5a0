#!/usr/bin/env python3
"""Model zoo benchmark: what `import torch_diode` does to real models under torch.compile.

Models are built from transformers configs with random weights (no download) and fewer
layers than the real model (`--layers`, default 2: the GEMM shapes do not depend on depth).
Every entry runs in every mode, each (model, dtype, mode) in its own Python subprocess with
empty Inductor and Triton caches (cold compile; caches force-disabled), the shapes of one
model in the same order in every mode:

  eager      the model itself (measured in the plain subprocess, before its compile)
  plain      torch.compile(model)
  default    torch.compile(model, mode="max-autotune-no-cudagraphs"): Inductor's DEFAULT list
  diode      import torch_diode, then torch.compile(model): zero configuration
  diode_ma   import torch_diode, then torch.compile(model, mode="max-autotune-no-cudagraphs")

(`-no-cudagraphs`: CUDA graphs change no kernel choice, and every mode is timed the same way.)
Per entry: GPU time per forward (the profiler's sum of device kernel times over `--reps`
forwards, the same measure in every mode), cold compile time (the first call), the output
against eager (relative L2 error, within the dtype's tolerance), and for the torch_diode
modes the path each GEMM took (the hook's CallRecords: cuBLAS, a Triton config, outside the
model's sizes, ...) and its GEMV reductions.

Entries: prefill (batch x sequence 1x512, 8x128, 4x2048; BERT's positions end at 512, so
4x512 there) and decode with a static KV cache as generation runs it compiled (one token,
batch 1, 8, 32, past 512 of a 1024-slot cache); vision models at batch 1, 8, 32.

FP8 (`--fp8`, or the dtypes "fp8" / "fp8_row"): the decoder models (Llama, Mistral, Qwen2)
in bfloat16 with every nn.Linear of their decoder layers replaced by FP8Linear: the weight
pre-quantised to float8_e4m3fn with a tensor-wise scale ("fp8"; `--fp8-scale row`: per-row
weight scales and per-token activation scales, "fp8_row"), the activation quantised on each
call (amax -> scale -> cast) and multiplied by torch._scaled_mm(..., out_dtype=bfloat16), the
bias (Qwen2's q/k/v) added after. Under torch.compile each of them is an aten._scaled_mm
lowering: the scaled_mm decision family's GEMMs. The eager reference is the FP8 model
itself (rel_err); as FP8 rounding amplifies the compiled code's other bfloat16 roundings, an
entry is also correct when its output is no further from the model before quantisation than
eager FP8's (rel_err_bf16, eager_rel_err_bf16: fp8_check). The report's dtype column labels
these rows FP8.

    # on the GPU machine, within one 10-minute device call:
    PYTHONPATH=python python3 bench/models.py run --out $OUT/zoo --dtypes bfloat16 --jobs 4 --budget-s 520
    # on any machine: the table, the goals and the plot from one or more runs
    python3 bench/models.py report RUN_DIR [RUN_DIR ...] --out DIR
    # CPU check of the whole path with tiny configs (the test runs this)
    python3 bench/models.py run --tiny --device cpu --models gpt2_medium --modes eager,plain,diode --out /tmp/z
    # the FP8 decoder models (tensor-wise scales; --fp8-scale row for row-wise)
    PYTHONPATH=python python3 bench/models.py run --fp8 --models llama3_8b,mistral_7b,qwen2_5_1_5b --out $OUT/fp8

GOALS below are issue "Real models"'s, judged by `report`.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from stats import geomean  # bench/stats.py: the package's one definition (torch_diode/summary_stats.py)

ROOT = Path(__file__).resolve().parent.parent
MODES = ("eager", "plain", "default", "diode", "diode_ma")
AUTOTUNE_MODE = "max-autotune-no-cudagraphs"
PREFILL = ((1, 512), (8, 128), (4, 2048))
DECODE_BATCHES = (1, 8, 32)
DECODE_PAST, DECODE_CACHE = 512, 1024
VISION_BATCHES = (1, 8, 32)
WARMUP_S = 1.0   # forwards before each timing: the GPU's clocks up from idle
# FP8 variants of the decoder models: dtype name -> scale kind (FP8Linear); they run in bfloat16
FP8_DTYPES = {"fp8": "tensor", "fp8_row": "row"}
FP8_FAMILIES = ("llama", "mistral", "qwen2")   # decoders whose layers are nn.Linear (GPT-2's are Conv1D)
FP8_MAX = 448.0                                # largest finite float8_e4m3fn
# relative L2 error of a compiled output against eager, per dtype (FP8: or against the model
# before quantisation, relative to eager FP8's error: fp8_check). FP8: against the eager FP8
# model; an activation that compiled code rounds to the other e4m3 neighbour (a step is 1/16
# to 1/8 of the value) moves the logits by a few percent: 0.055 (decode_b8, cuBLASLt) and
# 0.078 (prefill_8x128, Triton scaled_mm) for llama3_8b with 1 layer on an H200
TOLERANCE = {"bfloat16": 3e-2, "float16": 5e-3, "float32": 1e-4, "fp8": 1e-1, "fp8_row": 1e-1}
DTYPE_LABELS = {"fp8": "FP8 e4m3 (tensor scales)", "fp8_row": "FP8 e4m3 (row scales)"}

# Goals of issue "Real models" (ratios to plain / DEFAULT, per entry unless "geomean").
GOALS = {
    "diode_compile_vs_plain_max": 1.10,
    "diode_gpu_vs_plain_max": 1.00,
    "diode_gpu_vs_plain_geomean_max": 0.97,
    "diode_decode_b1_gpu_vs_plain_max": 0.90,
    "diode_ma_compile_vs_default_max": 0.25,
    "diode_ma_gpu_vs_min_plain_default_max": 1.00,
}
# GPU-time ratios within this of a goal are reported as "within noise" too (run-to-run
# spread of one forward's kernel sum; the decision is still the plain comparison)
NOISE = 0.01

# name -> (family, config kwargs); the real models' widths, `--layers` of them
ZOO = {
    "llama3_8b": ("llama", dict(hidden_size=4096, intermediate_size=14336, num_attention_heads=32,
                                num_key_value_heads=8, vocab_size=128256, max_position_embeddings=8192,
                                rope_theta=500000.0)),
    "mistral_7b": ("mistral", dict(hidden_size=4096, intermediate_size=14336, num_attention_heads=32,
                                   num_key_value_heads=8, vocab_size=32000, max_position_embeddings=8192)),
    "qwen2_5_1_5b": ("qwen2", dict(hidden_size=1536, intermediate_size=8960, num_attention_heads=12,
                                   num_key_value_heads=2, vocab_size=151936, max_position_embeddings=8192,
                                   tie_word_embeddings=True)),
    "gpt2_medium": ("gpt2", dict(n_embd=1024, n_head=16, vocab_size=50257, n_positions=2048)),
    "bert_base": ("bert", dict(hidden_size=768, intermediate_size=3072, num_attention_heads=12,
                               vocab_size=30522, max_position_embeddings=512)),
    "vit_l16": ("vit", dict(hidden_size=1024, intermediate_size=4096, num_attention_heads=16,
                            image_size=224, patch_size=16)),
    "resnet50": ("resnet", dict(embedding_size=64, hidden_sizes=[256, 512, 1024, 2048], depths=[3, 4, 6, 3],
                                layer_type="bottleneck")),
}
DECODERS = ("llama", "mistral", "qwen2", "gpt2")
TINY = dict(hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=2, vocab_size=256,
            n_embd=64, n_head=4, embedding_size=16, hidden_sizes=[16, 32], depths=[1, 1], image_size=32,
            patch_size=8, max_position_embeddings=4096, n_positions=4096)


def entries(model: str, tiny: bool = False) -> list[dict]:
    """The entries of one zoo model, in the order every mode runs them."""
    family = ZOO[model][0]
    if family in ("vit", "resnet"):
        return [{"kind": "vision", "batch": b, "label": f"b{b}"} for b in VISION_BATCHES]
    out = []
    for b, s in PREFILL:
        if family == "bert":
            s = min(s, 512)
        if tiny:
            s = min(s, 64)
        out.append({"kind": "prefill", "batch": b, "seq": s, "label": f"prefill_{b}x{s}"})
    if family in DECODERS:
        out += [{"kind": "decode", "batch": b, "label": f"decode_b{b}"} for b in DECODE_BATCHES]
    return out


# ====================================================================== worker (one subprocess)

def fp8_supported(model: str) -> bool:
    """Whether the zoo model has an FP8 variant (a decoder whose layers are nn.Linear)."""
    return ZOO[model][0] in FP8_FAMILIES


def _fp8_linear_class():
    import torch

    class FP8Linear(torch.nn.Module):
        """nn.Linear in FP8: the weight stored as float8_e4m3fn ([in, out], column-major as
        cuBLASLt requires of _scaled_mm's second operand) with its float32 scale(s); each call
        quantises the activation (amax -> scale -> cast) and runs torch._scaled_mm with a
        bfloat16 output. scale "tensor": one scale per tensor (scalars); "row": one per weight
        row (scale_b [1, out]) and one per token (scale_a [tokens, 1])."""

        def __init__(self, linear: torch.nn.Linear, scale: str = "tensor"):
            super().__init__()
            if scale not in ("tensor", "row"):
                raise ValueError(f"FP8Linear: scale {scale!r} (expected tensor or row)")
            self.scale = scale
            self.in_features, self.out_features = linear.in_features, linear.out_features
            w = linear.weight.detach().float()                        # [out, in]
            amax = w.abs().amax() if scale == "tensor" else w.abs().amax(dim=1, keepdim=True)
            s = (amax.clamp_min(1e-12) / FP8_MAX).float()
            q = (w / s).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
            self.register_buffer("weight_t", q.t())                   # [in, out], strides (1, in)
            self.register_buffer("scale_b", s.reshape(()) if scale == "tensor" else s.reshape(1, -1))
            b = linear.bias
            self.register_buffer("bias", None if b is None else b.detach().to(torch.bfloat16))

        def forward(self, x):
            lead = x.shape[:-1]
            x2 = x.reshape(-1, self.in_features)
            xf = x2.float()
            amax = xf.abs().amax() if self.scale == "tensor" else xf.abs().amax(dim=1, keepdim=True)
            scale_a = amax.clamp_min(1e-12) / FP8_MAX
            xq = (xf / scale_a).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
            y = torch._scaled_mm(xq, self.weight_t, scale_a=scale_a, scale_b=self.scale_b,
                                 out_dtype=torch.bfloat16)
            if self.bias is not None:
                y = y + self.bias
            return y.reshape(*lead, self.out_features)

    return FP8Linear


def quantise_fp8(model, scale: str) -> int:
    """Replaces every nn.Linear of the model's decoder layers (model.model.layers) by an
    FP8Linear of the same weight; returns how many were replaced."""
    import torch
    cls = _fp8_linear_class()
    layers = getattr(getattr(model, "model", None), "layers", None)
    if layers is None:
        raise ValueError(f"{type(model).__name__}: no decoder layers (model.model.layers) to quantise")
    n = 0
    for layer in layers:
        for name, mod in list(layer.named_modules()):
            for child_name, child in list(mod.named_children()):
                if isinstance(child, torch.nn.Linear):
                    setattr(mod, child_name, cls(child, scale))
                    n += 1
    return n


def build_model(model: str, layers: int, dtype, device: str, tiny: bool):
    import torch
    import transformers as tf
    family, kw = ZOO[model]
    kw = dict(kw)
    if tiny:
        kw.update({k: v for k, v in TINY.items() if k in kw or k in ("max_position_embeddings", "n_positions")})
        if family == "resnet":
            kw["hidden_sizes"], kw["depths"] = TINY["hidden_sizes"], TINY["depths"]
    layer_key = {"gpt2": "n_layer"}.get(family, "num_hidden_layers")
    if family != "resnet":
        kw[layer_key] = layers
    cls = {"llama": (tf.LlamaConfig, tf.LlamaForCausalLM), "mistral": (tf.MistralConfig, tf.MistralForCausalLM),
           "qwen2": (tf.Qwen2Config, tf.Qwen2ForCausalLM), "gpt2": (tf.GPT2Config, tf.GPT2LMHeadModel),
           "bert": (tf.BertConfig, tf.BertModel), "vit": (tf.ViTConfig, tf.ViTModel),
           "resnet": (tf.ResNetConfig, tf.ResNetModel)}[family]
    cfg = cls[0](**kw)
    torch.manual_seed(0)
    with torch.device(device):
        m = cls[1](cfg)
    return m.to(dtype).eval(), cfg


def static_cache(model, cfg, batch: int, dtype, device: str):
    """transformers' StaticCache, whichever constructor this version has."""
    import inspect
    from transformers import StaticCache
    params = inspect.signature(StaticCache.__init__).parameters
    kw = {"config": cfg, "max_cache_len": DECODE_CACHE}
    for name, value in (("max_batch_size", batch), ("batch_size", batch), ("device", device), ("dtype", dtype)):
        if name in params:
            kw[name] = value
    return StaticCache(**kw)


def make_call(model, cfg, model_name: str, entry: dict, dtype, device: str):
    """(fn, args) of one entry: fn(*args) is one forward, returning one tensor."""
    import torch
    family = ZOO[model_name][0]
    g = torch.Generator(device="cpu").manual_seed(1)
    if entry["kind"] == "vision":
        size = cfg.image_size if family == "vit" else 224
        if family == "resnet" and getattr(cfg, "hidden_sizes", [0])[0] < 64:  # tiny
            size = 32
        x = torch.randn(entry["batch"], 3, size, size, generator=g).to(device=device, dtype=dtype)
        if family == "vit":
            return (lambda px: model(pixel_values=px).last_hidden_state), (x,)
        return (lambda px: model(pixel_values=px).pooler_output), (x,)
    vocab = cfg.vocab_size
    if entry["kind"] == "prefill":
        ids = torch.randint(0, vocab, (entry["batch"], entry["seq"]), generator=g).to(device)
        if family == "bert":
            return (lambda i: model(input_ids=i).last_hidden_state), (ids,)
        return (lambda i: model(input_ids=i, use_cache=False).logits), (ids,)
    # decode: one token at position DECODE_PAST of a static cache, as a compiled generate step runs
    b = entry["batch"]
    cache = static_cache(model, cfg, b, dtype, device)
    ids = torch.randint(0, vocab, (b, 1), generator=g).to(device)
    pos = torch.tensor([DECODE_PAST], device=device)

    pos_ids = pos.expand(b, 1).contiguous()  # explicit: GPT-2 otherwise counts the cache's filled slots

    def step(i, p, pi):
        # transformers 5's StaticCache layers count the tokens written (`cumulative_length`)
        # and index with the count: thousands of timed steps at one position ran it past
        # max_cache_len (a device-side assert after ~630 compiled steps at 1 layer). Each step
        # is the token at DECODE_PAST, so the count is put back to DECODE_PAST first.
        for layer in getattr(cache, "layers", ()):
            n = getattr(layer, "cumulative_length", None)
            if isinstance(n, torch.Tensor):
                n.fill_(DECODE_PAST)
        return model(input_ids=i, past_key_values=cache, cache_position=p, position_ids=pi, use_cache=True).logits
    return step, (ids, pos, pos_ids)


def eager_reference(model, cfg, model_name: str, entry: dict, dtype, device: str):
    """(fn, args, ref): make_call's and the eager output of its second call. The first call is a
    warm-up: a decode step's first call runs before the static cache's layers are initialised,
    and transformers 5.24's mask takes its query offset from the cache's length (0 until
    initialised), so the first token attended to slot 0 alone, not to slots 0..DECODE_PAST as
    every later (compiled, timed) step does (relative L2 0.10 between the two on qwen2_5_1_5b's
    logits in bfloat16)."""
    import torch
    fn, args = make_call(model, cfg, model_name, entry, dtype, device)
    with torch.no_grad():
        fn(*args)
        ref = fn(*args).float()
    return fn, args, ref


def rel_l2(out, ref) -> float:
    return float((out.float() - ref.float()).norm() / ref.float().norm().clamp_min(1e-30))


def fp8_check(out, ref, hp_ref, tol: float) -> dict:
    """FP8's output check. Against the eager FP8 model alone (rel_err) it is not a check of the
    kernels: compiled code keeps the float32 of RMSNorm / SiLU*up into the activation's quantise
    where eager rounds them to bfloat16 first, a rounding that moves some activations to the other
    e4m3 neighbour, and the random-weight models amplify it: on CPU (full widths, 2 layers) a
    single FP8Linear compiled is bit-identical to eager, yet qwen2_5_1_5b's logits move 0.092
    (prefill_1x64) and 0.076 (decode_b1) compiled vs eager, and 0.094 / 0.078 in eager alone when
    the FP8Linear inputs get a random 2^-9 relative perturbation (below bfloat16's rounding); on the
    H200 0.09-0.18, and 0.12-0.13 for llama3_8b's prefill, the same in plain and torch_diode modes.
    So both outputs are compared with the model before quantisation (hp_ref, bfloat16 weights):
    correct when the compiled output is no further from it than the eager FP8 output is, within
    tol (relative), or when it is within tol of the eager FP8 output. A wrong kernel (a wrong
    scale, a transposed operand) is O(1) off both."""
    err, c_hp, e_hp = rel_l2(out, ref), rel_l2(out, hp_ref), rel_l2(ref, hp_ref)
    return {"rel_err_bf16": c_hp, "eager_rel_err_bf16": e_hp,
            "correct": err <= tol or c_hp <= e_hp * (1 + tol)}


def gpu_time_us(fn, args, reps: int, device: str) -> dict:
    """Device kernel time per forward: the profiler's sum of kernel durations over `reps`
    forwards, divided by reps, after WARMUP_S of forwards (at least 3): an idle GPU runs its
    first milliseconds at lower clocks, which read as +-10% on the same cuBLAS kernels of two
    processes with 3 warm-up forwards only. CPU runs (--device cpu): wall time."""
    import torch
    t0, n = time.perf_counter(), 0
    while n < 3 or (device == "cuda" and time.perf_counter() - t0 < WARMUP_S):
        fn(*args)
        n += 1
        if device == "cuda" and n % 8 == 0:
            torch.cuda.synchronize()
    if device != "cuda":
        t0 = time.perf_counter()
        for _ in range(reps):
            fn(*args)
        return {"us": (time.perf_counter() - t0) * 1e6 / reps, "method": "cpu wall"}
    torch.cuda.synchronize()
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            fn(*args)
        torch.cuda.synchronize()
    total, kernels = 0.0, {}
    for e in prof.events():
        if getattr(e, "device_type", None) != torch.autograd.DeviceType.CUDA:
            continue
        us = e.time_range.elapsed_us()
        total += us
        kernels[e.name] = kernels.get(e.name, 0.0) + us
    top = sorted(kernels.items(), key=lambda kv: -kv[1])[:6]
    return {"us": total / reps, "method": "profiler kernel sum",
            "top_kernels": [[n[:120], round(us / reps, 2)] for n, us in top]}


class GpuLock:
    """The GPU of concurrent workers: the timing of one forward must be the only GPU work
    (another process's kernels would share the SMs and stretch the timed kernels), while the
    rest (building the model, eager references, plain compiles and their first forward) may
    overlap. A reader-writer lock on a file: `shared()` for GPU work that may overlap,
    `exclusive()` for timing and for max-autotune's compile (its benchmark is a timing too),
    with writer preference through a turnstile file, so a waiting timing is not starved by
    compiles that keep overlapping. Without a path (one worker) both are no-ops."""

    def __init__(self, path: str | None):
        self.path = path

    def _held(self, mode_name: str):
        import contextlib
        import fcntl
        if not self.path:
            return contextlib.nullcontext()
        mode = fcntl.LOCK_EX if mode_name == "ex" else fcntl.LOCK_SH

        @contextlib.contextmanager
        def held():
            with open(self.path + ".turnstile", "a+") as t, open(self.path, "a+") as f:
                fcntl.flock(t, fcntl.LOCK_EX)       # no new reader while a writer waits
                try:
                    fcntl.flock(f, mode)
                finally:
                    fcntl.flock(t, fcntl.LOCK_UN)
                try:
                    yield
                finally:
                    fcntl.flock(f, fcntl.LOCK_UN)
        return held()

    def shared(self):
        return self._held("sh")

    def exclusive(self):
        return self._held("ex")


def profile_rows(prof, top: int = 40) -> list:
    """The cold compile's functions by cumulative time: [file:line(function), calls, own s, cum s]."""
    import pstats
    prof.disable()
    rows = [[f"{f}:{ln}({fn})", nc, round(tt, 4), round(ct, 4)]
            for (f, ln, fn), (cc, nc, tt, ct, _) in pstats.Stats(prof).stats.items()]
    return sorted(rows, key=lambda r: -r[3])[:top]


def gemm_paths(records) -> dict:
    """Counts of the paths the hook's GEMM decisions took (one CallRecord per finalize call)."""
    out: dict[str, int] = {}
    for r in records:
        if r.outcome == "model" or r.predicted:
            key = r.predicted or "model"
        else:
            key = r.outcome
        out[key] = out.get(key, 0) + 1
    return out


def worker(a) -> dict:
    import torch
    from torch._inductor import config
    res = {"model": a.model, "dtype": a.dtype, "mode": a.mode, "torch": torch.__version__, "entries": []}
    try:
        import triton
        res["triton"] = triton.__version__
    except ImportError:
        res["triton"] = None
    import transformers
    res["transformers"] = transformers.__version__
    device = a.device
    if device == "cuda":
        res["gpu"] = torch.cuda.get_device_name()
    config.force_disable_caches = True
    fp8 = FP8_DTYPES.get(a.dtype)   # None, or the scale kind of the FP8 variant
    dtype = torch.bfloat16 if fp8 else getattr(torch, a.dtype)
    diode = None
    if a.mode in ("diode", "diode_ma"):
        t0 = time.perf_counter()
        import torch_diode as diode
        res["install_s"] = time.perf_counter() - t0
        st = diode.get_prediction_stats()
        res["diode_model"] = {k: st.get(k) for k in ("installed", "model_hardware_key", "model_version",
                                                     "model_source", "no_model_reason", "gemv_table")}
    recorder = None
    if a.record_coordesc and a.mode in ("default", "diode_ma"):   # max-autotune turns coordinate descent on
        from torch_diode.collect.coordesc import CoordescRecorder
        recorder = CoordescRecorder(a.record_coordesc).install()
    gpu = GpuLock(a.gpu_lock)
    plan = [e for e in entries(a.model, a.tiny) if not a.only or e["label"] in a.only]
    hp_refs = {}   # FP8: label -> the output of the model before quantisation (see fp8_check)
    with gpu.shared():
        model, cfg = build_model(a.model, a.layers, dtype, device, a.tiny)
        if fp8 and a.mode != "eager":
            for entry in plan:
                try:
                    hp_refs[entry["label"]] = eager_reference(model, cfg, a.model, entry, dtype, device)[2].to(dtype)
                except Exception:  # noqa: BLE001 - the entry's own run reports its error
                    pass
        if fp8:
            res["fp8"] = {"scale": fp8, "linears": quantise_fp8(model, fp8)}
    for entry in plan:
        row = dict(entry)
        try:
            with gpu.shared():
                fn, args, ref = eager_reference(model, cfg, a.model, entry, dtype, device)
            with torch.no_grad():
                if a.mode == "eager":
                    with gpu.exclusive():
                        row["gpu"] = gpu_time_us(fn, args, a.reps, device)
                    res["entries"].append(row)
                    continue
                torch._dynamo.reset()
                if recorder is not None:
                    recorder.tags = {"model": a.model, "dtype": a.dtype, "mode": a.mode, "entry": entry["label"]}
                    tuned0 = len(recorder.records)
                kw = {"mode": AUTOTUNE_MODE} if a.mode in ("default", "diode_ma") else {}
                compiled = torch.compile(fn, **kw)
                sink = []
                gemv0 = dict(diode.get_prediction_stats().get("gemv") or {}) if diode else {}
                ctx = diode.profile_predictions() if diode else None
                if ctx is not None:
                    sink = ctx.__enter__()
                # max-autotune benchmarks on the GPU while it compiles: alone on it, as timing is
                hold = gpu.exclusive() if a.mode in ("default", "diode_ma") else gpu.shared()
                with hold:
                    prof = None
                    if a.profile:  # slows Python ~1.5x: compare profiled runs with each other only
                        import cProfile
                        prof = cProfile.Profile()
                        prof.enable()
                    t0 = time.perf_counter()
                    out = compiled(*args)
                    if device == "cuda":
                        torch.cuda.synchronize()
                    row["compile_s"] = time.perf_counter() - t0
                    if prof is not None:
                        row["compile_profile"] = profile_rows(prof)
                if recorder is not None:   # what coordinate descent did during this compile
                    from torch_diode.collect.coordesc import summarize
                    row["coordesc"] = summarize(recorder.records[tuned0:])
                if ctx is not None:
                    ctx.__exit__(None, None, None)
                    row["gemm_paths"] = gemm_paths(sink)
                    gemv1 = diode.get_prediction_stats().get("gemv") or {}
                    for outcome, n in gemv1.items():  # M = 1 / N = 1 GEMMs the GEMV table made reductions
                        if n - gemv0.get(outcome, 0):
                            row["gemm_paths"][f"gemv:{outcome}"] = n - gemv0.get(outcome, 0)
                    row["gemms"] = [{"op": r.op, "problem": r.problem, "outcome": r.outcome,
                                     "predicted": r.predicted} for r in sink]
                err = rel_l2(out, ref)
                row["rel_err"] = err
                row["correct"] = err <= TOLERANCE[a.dtype]
                if entry["label"] in hp_refs:
                    row.update(fp8_check(out, ref, hp_refs[entry["label"]], TOLERANCE[a.dtype]))
                with gpu.exclusive():
                    row["gpu"] = gpu_time_us(compiled, args, a.reps, device)
                del compiled, out
        except Exception as e:  # one entry failing must not lose the others
            row["error"] = f"{type(e).__name__}: {str(e)[:400]}"
        res["entries"].append(row)
    if diode is not None:
        st = diode.get_prediction_stats()
        res["diode_stats"] = {k: st.get(k) for k in ("calls", "passthrough", "predicted", "fallbacks", "gemv",
                                                     "family_models") if k in st}
    res["status"] = "ok"
    return res


# ====================================================================== driver

def worker_env(tmp: str, mode: str) -> dict:
    env = dict(os.environ)
    env.update(TORCHINDUCTOR_CACHE_DIR=os.path.join(tmp, "inductor"), TORCHINDUCTOR_FORCE_DISABLE_CACHES="1",
               TRITON_CACHE_DIR=os.path.join(tmp, "triton"),
               PYTHONPATH=str(ROOT / "python") + os.pathsep + env.get("PYTHONPATH", ""))
    env["TORCH_DIODE_AUTO_INSTALL"] = "1" if mode.startswith("diode") else "0"
    return env


def run_job(a, model: str, dtype: str, mode: str, deadline: float) -> dict:
    left = deadline - time.time()
    if left < 20:
        return {"model": model, "dtype": dtype, "mode": mode, "status": "skipped_budget"}
    with tempfile.TemporaryDirectory(prefix="diode_zoo_") as tmp:
        out = os.path.join(tmp, "result.json")
        cmd = [sys.executable, os.path.abspath(__file__), "worker", "--model", model, "--dtype", dtype, "--mode", mode,
               "--layers", str(a.layers), "--reps", str(a.reps), "--device", a.device, "--result", out,
               "--gpu-lock", a.gpu_lock]
        only = a.autotune_only if mode in ("default", "diode_ma") and a.autotune_only else a.only
        if a.record_coordesc and mode in ("default", "diode_ma"):
            cmd += ["--record-coordesc", os.path.join(os.path.abspath(a.out), f"coordesc-{model}-{dtype}-{mode}.jsonl")]
        cmd += ["--tiny"] * a.tiny + ["--profile"] * a.profile + (["--only", ",".join(only)] if only else [])
        t0 = time.time()
        try:
            p = subprocess.run(cmd, env=worker_env(tmp, mode), capture_output=True, text=True, timeout=left)
            rc, err = p.returncode, p.stderr
        except subprocess.TimeoutExpired as e:
            rc, err = None, (e.stderr or b"").decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
        wall = time.time() - t0
        if rc == 0 and os.path.exists(out):
            res = json.loads(Path(out).read_text())
        else:
            res = {"model": model, "dtype": dtype, "mode": mode,
                   "status": "timeout" if rc is None else f"failed rc={rc}", "stderr_tail": err[-2000:]}
        res["wall_s"] = wall
        print(f"[{time.strftime('%H:%M:%S')}] {model} {dtype} {mode}: {res['status']} in {wall:.0f}s", flush=True)
        return res


def run(a) -> int:
    os.makedirs(a.out, exist_ok=True)
    # one lock file per machine: concurrent drivers share the GPU too
    a.gpu_lock = os.path.join(tempfile.gettempdir(), "diode_zoo_gpu.lock")
    deadline = time.time() + a.budget_s
    modes = [m for m in a.modes if m in MODES]
    # eager is measured in its own subprocess too (no compile), so every process has one job
    jobs = [(m, d, mode) for m in a.models for d in a.dtypes for mode in modes
            if d not in FP8_DTYPES or fp8_supported(m)]
    skipped = sorted({m for m in a.models for d in a.dtypes if d in FP8_DTYPES and not fp8_supported(m)})
    if skipped:
        print(f"no FP8 variant (not a Llama/Mistral/Qwen2 decoder): {', '.join(skipped)}", flush=True)
    # slow modes last: what does not fit the budget is the autotuning, reported as skipped
    jobs.sort(key=lambda j: (j[2] in ("default", "diode_ma"), a.models.index(j[0])))
    results = []
    with ThreadPoolExecutor(a.jobs) as pool:
        for r in pool.map(lambda j: run_job(a, *j, deadline), jobs):
            results.append(r)
            Path(a.out, "results.json").write_text(json.dumps({"results": results}, indent=1))
    print(f"wrote {a.out}/results.json ({len(results)} jobs)")
    return 0


# ====================================================================== report

def _index(results: list[dict]) -> dict:
    idx = {}
    for r in results:
        for e in r.get("entries", []):
            if "gpu" in e and "error" not in e:
                idx[(r["model"], r["dtype"], e["label"], r["mode"])] = (e, r)
    return idx


# an entry's phase, from its label's prefix (entries(): prefill_BxS, decode_bB); vision entries have none
PHASES = ("prefill", "decode")


def phase_of(label: str) -> str | None:
    head = label.split("_", 1)[0]
    return head if head in PHASES else None


def _compile_sum(pairs: list[tuple[float, float]]) -> dict:
    """Summed compile seconds of diode and plain over entries, and their ratio."""
    ds, ps = sum(d for d, _ in pairs), sum(p for _, p in pairs)
    return {"ratio": ds / ps if ps else None, "diode_s": ds, "plain_s": ps, "entries": len(pairs)}


def _breakdown(rows: list[dict]) -> dict:
    """The diode / plain figures per dtype and phase: GPU-time geomeans (bench/stats.py's
    geomean) and compile seconds summed over entries (sum diode / sum plain), overall, per
    dtype and per (model, dtype), over the rows that have both modes."""
    both = [r for r in rows if "diode_gpu" in r]
    dtypes = list(dict.fromkeys(r["dtype"] for r in both))
    by_dtype, by_phase, compile_by_dtype = {}, {}, {}
    for dt in dtypes:
        rs = [r for r in both if r["dtype"] == dt]
        by_dtype[dt] = {"geomean": geomean([r["diode_gpu"] for r in rs]), "entries": len(rs)}
        phases = {ph: [r["diode_gpu"] for r in rs if r["phase"] == ph] for ph in PHASES}
        phases = {ph: {"geomean": geomean(v), "entries": len(v)} for ph, v in phases.items() if v}
        if phases:
            by_phase[dt] = phases
        compile_by_dtype[dt] = _compile_sum([(r["diode_compile_s"], r["plain_compile_s"]) for r in rs])
    pairs = list(dict.fromkeys((r["model"], r["dtype"]) for r in both))
    compile_by_pair = [dict(model=m, dtype=dt, **_compile_sum([(r["diode_compile_s"], r["plain_compile_s"])
                                                              for r in both if (r["model"], r["dtype"]) == (m, dt)]))
                       for m, dt in pairs]
    return {"diode_gpu_vs_plain_geomean_by_dtype": by_dtype,
            "diode_gpu_vs_plain_geomean_by_dtype_phase": by_phase,
            "diode_compile_vs_plain_summed": _compile_sum([(r["diode_compile_s"], r["plain_compile_s"]) for r in both]),
            "diode_compile_vs_plain_summed_by_dtype": compile_by_dtype,
            "diode_compile_vs_plain_summed_by_model_dtype": compile_by_pair}


def breakdown_lines(b: dict) -> list[str]:
    """The report's lines of _breakdown's figures (3 decimals, as the docs quote them)."""
    f3 = lambda x: "-" if x is None else f"{x:.3f}"
    out = []
    by_dtype, by_phase = b["diode_gpu_vs_plain_geomean_by_dtype"], b["diode_gpu_vs_plain_geomean_by_dtype_phase"]
    if len(by_dtype) > 1:
        out.append("diode / plain GPU time, geomean per dtype: " + ", ".join(
            f"{dt} {f3(v['geomean'])} ({v['entries']} entries)" for dt, v in by_dtype.items()))
    if by_phase:
        out.append("diode / plain GPU time, geomean per dtype and phase: " + ", ".join(
            f"{dt} {ph} {f3(v['geomean'])} ({v['entries']} entries)"
            for dt, phases in by_phase.items() for ph, v in phases.items()))
    c = b["diode_compile_vs_plain_summed"]
    if c["entries"]:
        s = lambda v: f"{f3(v['ratio'])} ({v['diode_s']:.1f} / {v['plain_s']:.1f} s)"
        line = f"diode / plain compile time, summed over {c['entries']} entries: {s(c)}"
        if len(by_dtype) > 1:
            line += "; per dtype: " + ", ".join(f"{dt} {s(v)}"
                                                for dt, v in b["diode_compile_vs_plain_summed_by_dtype"].items())
        out.append(line)
        out.append("diode / plain compile time, summed per (model, dtype): " + ", ".join(
            f"{v['model']} {v['dtype']} {s(v)}" for v in b["diode_compile_vs_plain_summed_by_model_dtype"]))
    return out


def coordesc_lines(results: list[dict]) -> list[str]:
    """Per max-autotune mode, what coordinate descent did over the entries recorded with
    --record-coordesc: kernels tuned, configs timed, seconds of the compiles spent in it,
    and the summed time of the kernels at their winners over at their heuristic start."""
    out = []
    for mode in ("default", "diode_ma"):
        es = [e for r in results if r.get("mode") == mode and r.get("status") == "ok"
              for e in r.get("entries", []) if "coordesc" in e and "compile_s" in e]
        if not es:
            continue
        c = [e["coordesc"] for e in es]
        tune, comp = sum(x["tune_s"] for x in c), sum(e["compile_s"] for e in es)
        base, best = sum(x["baseline_ms"] for x in c), sum(x["best_ms"] for x in c)
        out.append(f"coordinate descent in {mode} over {len(es)} entries: {sum(x['kernels'] for x in c)} kernels "
                   f"({sum(x['kernels_improved'] for x in c)} moved from the heuristics' config), "
                   f"{sum(x['configs_timed'] for x in c)} configs timed, {tune:.1f} of {comp:.1f} s compile "
                   f"({(tune / comp if comp else 0):.0%}); kernels' time at the winner / at the start, "
                   f"each launched once: {(best / base if base else float('nan')):.3f}")
    return out


def report(a) -> int:
    results = []
    for d in a.runs:
        results += json.loads(Path(d, "results.json").read_text())["results"]
    idx = _index(results)
    keys = sorted({k[:3] for k in idx}, key=lambda k: (list(ZOO).index(k[0]), k[1], k[2]))
    rows, fails = [], []
    lines = ["| model | dtype | entry | eager | plain us | diode / plain GPU | diode / plain compile | "
             "DEFAULT / plain GPU | diode_ma / min(plain, DEFAULT) GPU | diode_ma / DEFAULT compile | "
             "diode GEMM paths | goals |", "|" + "---|" * 12]

    def get(k, mode):
        v = idx.get(k + (mode,))
        return v[0] if v else None

    gpu_ratios, b1 = [], []
    for k in keys:
        e = {m: get(k, m) for m in MODES}
        p, d, df, dm = e["plain"], e["diode"], e["default"], e["diode_ma"]
        row = {"model": k[0], "dtype": k[1], "entry": k[2], "phase": phase_of(k[2])}
        notes = []
        if p and d:
            row["diode_gpu"] = d["gpu"]["us"] / p["gpu"]["us"]
            row["same_kernels"] = set(d.get("gemm_paths", {})) <= {"aten", "passthrough:outside_domain",
                                                                     "gemv:cublas_or_model", "gemv:plain_compile"}
            row["diode_compile"] = d["compile_s"] / p["compile_s"]
            row["diode_compile_s"], row["plain_compile_s"] = d["compile_s"], p["compile_s"]
            gpu_ratios.append(row["diode_gpu"])
            if row["diode_gpu"] > GOALS["diode_gpu_vs_plain_max"]:
                notes.append("GPU>plain" + (" (noise)" if row["diode_gpu"] <= 1 + NOISE else ""))
            if row["diode_compile"] > GOALS["diode_compile_vs_plain_max"]:
                notes.append("compile")
            if k[2] == "decode_b1":
                b1.append(row["diode_gpu"])
                if row["diode_gpu"] > GOALS["diode_decode_b1_gpu_vs_plain_max"]:
                    notes.append("decode_b1")
        if p and df:
            row["default_gpu"] = df["gpu"]["us"] / p["gpu"]["us"]
        if dm and p and df:
            row["ma_gpu"] = dm["gpu"]["us"] / min(p["gpu"]["us"], df["gpu"]["us"])
            row["ma_compile"] = dm["compile_s"] / df["compile_s"]
            if row["ma_gpu"] > GOALS["diode_ma_gpu_vs_min_plain_default_max"]:
                notes.append("ma GPU")
            if row["ma_compile"] > GOALS["diode_ma_compile_vs_default_max"]:
                notes.append("ma compile")
        for m, v in e.items():
            if v is not None and v.get("correct") is False:
                notes.append(f"{m} output off ({v['rel_err']:.2g})")
        row["notes"] = notes
        rows.append(row)
        fails += [f"{k}: {n}" for n in notes]
        f = (lambda x, fmt="{:.3f}": fmt.format(x) if x is not None else "-")
        paths = ", ".join(f"{n} {c}" for n, c in sorted((d or {}).get("gemm_paths", {}).items()))
        lines.append(f"| {k[0]} | {DTYPE_LABELS.get(k[1], k[1])} | {k[2]} | {f(e['eager']['gpu']['us'] if e['eager'] else None, '{:.0f}')} | "
                     f"{f(p['gpu']['us'] if p else None, '{:.0f}')} | {f(row.get('diode_gpu'))} | "
                     f"{f(row.get('diode_compile'))} | {f(row.get('default_gpu'))} | {f(row.get('ma_gpu'))} | "
                     f"{f(row.get('ma_compile'))} | {paths or '-'} | {'; '.join(notes) or 'pass'} |")
    gm = geomean(gpu_ratios)
    # rows where torch_diode handed every GEMM to cuBLAS, as plain does: the same kernels in
    # both processes, so their ratios are the measurement's own spread (an A/A comparison)
    same = [r["diode_gpu"] for r in rows if "diode_gpu" in r and r.get("same_kernels")]
    summary = {"entries": len(rows), "diode_gpu_vs_plain_geomean": gm,
               "same_kernels_geomean": geomean(same), "same_kernels_entries": len(same),
               "same_kernels_range": [min(same), max(same)] if same else None,
               "geomean_goal_met": gm <= GOALS["diode_gpu_vs_plain_geomean_max"] if gpu_ratios else None,
               "decode_b1": b1, "goals": GOALS, "failures": fails,
               "runs": sorted({(r.get("gpu"), r.get("torch"), r.get("triton"), r.get("transformers"))
                               for r in results if r.get("status") == "ok"}, key=str)}
    breakdown = _breakdown(rows)
    summary.update(breakdown)
    lines.append("")
    lines.append(f"diode / plain GPU time, geomean over {len(gpu_ratios)} entries: {'-' if gm is None else f'{gm:.3f}'} "
                 f"(goal <= {GOALS['diode_gpu_vs_plain_geomean_max']})")
    if same:
        lines.append(f"entries where every GEMM took cuBLAS in both modes (the same kernels: the measurement's "
                     f"spread): {len(same)}, geomean {geomean(same):.3f}, range {min(same):.3f}-{max(same):.3f}")
    lines += breakdown_lines(breakdown)
    lines += coordesc_lines(results)
    text = "\n".join(lines)
    print(text)
    os.makedirs(a.out, exist_ok=True)
    Path(a.out, "table.md").write_text(text + "\n")
    Path(a.out, "summary.json").write_text(json.dumps({"summary": summary, "rows": rows}, indent=1))
    Path(a.out, "speedup_vs_compile.svg").write_text(plot_svg(rows))
    return 0


def plot_svg(rows: list[dict]) -> str:
    """Speed-up over plain (x: plain GPU time / mode's) against compile time over plain's (y),
    one point per entry; circles: torch_diode zero configuration, squares: DEFAULT max-autotune."""
    W, H, L, B = 640, 420, 70, 50
    pts = []
    for r in rows:
        if "diode_gpu" in r:
            pts.append(("diode", 1 / r["diode_gpu"], r["diode_compile"], f"{r['model']} {r['entry']}"))
    xs = [p[1] for p in pts] or [1.0]
    ys = [p[2] for p in pts] or [1.0]
    x0, x1 = min(0.9, min(xs)), max(1.2, max(xs))
    y0, y1 = 0.0, max(2.0, max(ys) * 1.1)
    sx = lambda x: L + (x - x0) / (x1 - x0) * (W - L - 20)
    sy = lambda y: H - B - (y - y0) / (y1 - y0) * (H - B - 20)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">',
           f'<rect width="{W}" height="{H}" fill="white"/>',
           f'<line x1="{L}" y1="{H - B}" x2="{W - 20}" y2="{H - B}" stroke="black"/>',
           f'<line x1="{L}" y1="{H - B}" x2="{L}" y2="20" stroke="black"/>',
           f'<line x1="{sx(1)}" y1="{H - B}" x2="{sx(1)}" y2="20" stroke="#999" stroke-dasharray="4 3"/>',
           f'<line x1="{L}" y1="{sy(1)}" x2="{W - 20}" y2="{sy(1)}" stroke="#999" stroke-dasharray="4 3"/>',
           f'<text x="{(L + W) / 2}" y="{H - 12}" text-anchor="middle">speed-up over plain torch.compile (GPU time)</text>',
           f'<text x="16" y="{(H - B) / 2}" transform="rotate(-90 16 {(H - B) / 2})" text-anchor="middle">'
           'compile time / plain</text>']
    for t in [x / 20 for x in range(int(x0 * 20), int(x1 * 20) + 1) if x % 2 == 0]:
        out.append(f'<text x="{sx(t)}" y="{H - B + 16}" text-anchor="middle">{t:.1f}</text>')
    step = 0.5 if y1 <= 4 else 1.0
    t = 0.0
    while t <= y1:
        out.append(f'<text x="{L - 6}" y="{sy(t) + 4}" text-anchor="end">{t:.1f}</text>')
        t += step
    # one colour and marker per model (Okabe-Ito, colour-blind safe), a legend at the right
    palette = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#D55E00", "#56B4E9", "#000000", "#F0E442"]
    models = list(dict.fromkeys(label.split()[0] for *_, label in pts))
    colour = {m: palette[i % len(palette)] for i, m in enumerate(models)}
    for _, x, y, label in pts:
        out.append(f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="4" fill="{colour[label.split()[0]]}" '
                   f'fill-opacity="0.8"><title>{label}: {x:.3f}x, compile {y:.2f}x</title></circle>')
    for i, m in enumerate(models):
        out.append(f'<circle cx="{W - 150}" cy="{30 + 16 * i}" r="4" fill="{colour[m]}"/>'
                   f'<text x="{W - 140}" y="{34 + 16 * i}">{m}</text>')
    out.append("</svg>")
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    csv = lambda s: [x for x in s.split(",") if x]
    r = sub.add_parser("run", help="run the zoo (the driver: one subprocess per model, dtype and mode)")
    r.add_argument("--out", required=True)
    r.add_argument("--models", type=csv, default=list(ZOO))
    r.add_argument("--dtypes", type=csv, default=["bfloat16", "float16"],
                   help=f"bfloat16, float16, float32, or the FP8 variants {', '.join(FP8_DTYPES)}")
    r.add_argument("--fp8", action="store_true",
                   help="run the FP8 variant of the decoder models (instead of --dtypes): dtype fp8, or fp8_row "
                        "with --fp8-scale row")
    r.add_argument("--fp8-scale", choices=("tensor", "row"), default="tensor",
                   help="--fp8's scales: tensor-wise, or row-wise weights with per-token activations")
    r.add_argument("--modes", type=csv, default=list(MODES))
    r.add_argument("--only", type=csv, default=None, help="entry labels to run (e.g. prefill_8x128,decode_b1)")
    r.add_argument("--autotune-only", type=csv, default=None,
                   help="entry labels for the max-autotune modes (default, diode_ma) only: they take minutes")
    r.add_argument("--layers", type=int, default=2)
    r.add_argument("--reps", type=int, default=10)
    r.add_argument("--jobs", type=int, default=4)
    r.add_argument("--budget-s", type=float, default=520)
    r.add_argument("--device", default="cuda")
    r.add_argument("--tiny", action="store_true", help="tiny configs (CPU check of the path)")
    r.add_argument("--profile", action="store_true", help="cProfile each cold compile (into results.json)")
    r.add_argument("--record-coordesc", action="store_true",
                   help="record coordinate descent in the max-autotune modes (torch_diode.collect.coordesc): "
                        "OUT/coordesc-MODEL-DTYPE-MODE.jsonl, and a summary per entry in results.json")
    w = sub.add_parser("worker", help=argparse.SUPPRESS)
    for n in ("--model", "--dtype", "--mode", "--result", "--device"):
        w.add_argument(n, required=True)
    w.add_argument("--layers", type=int, default=2)
    w.add_argument("--reps", type=int, default=10)
    w.add_argument("--gpu-lock")
    w.add_argument("--only", type=csv, default=None)
    w.add_argument("--tiny", action="store_true")
    w.add_argument("--profile", action="store_true")
    w.add_argument("--record-coordesc", default=None, help="the recorder's JSON-lines file")
    p = sub.add_parser("report", help="the table, goals and plot of one or more run directories")
    p.add_argument("runs", nargs="+")
    p.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    if a.cmd == "run":
        unknown = [m for m in a.models if m not in ZOO]
        if unknown:
            ap.error(f"unknown models {unknown}; the zoo: {', '.join(ZOO)}")
        if a.fp8:
            a.dtypes = ["fp8" if a.fp8_scale == "tensor" else "fp8_row"]
        bad = [d for d in a.dtypes if d not in TOLERANCE]
        if bad:
            ap.error(f"unknown dtypes {bad}; expected {', '.join(TOLERANCE)}")
        if any(d in FP8_DTYPES for d in a.dtypes) and not any(fp8_supported(m) for m in a.models):
            ap.error("no model with an FP8 variant among --models (Llama, Mistral, Qwen2 decoders: "
                     f"{', '.join(m for m in ZOO if fp8_supported(m))})")
        return run(a)
    if a.cmd == "worker":
        res = worker(a)
        Path(a.result).write_text(json.dumps(res))
        return 0
    return report(a)


if __name__ == "__main__":
    sys.exit(main())
