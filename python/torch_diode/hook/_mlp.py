"""The `residual_mlp` architecture of docs/model-format.md as a torch module."""
from __future__ import annotations

import torch
from torch import nn


class _Block(nn.Module):
    def __init__(self, hidden: int):
        super().__init__()
        self.fc1 = nn.Linear(hidden, hidden)
        self.fc2 = nn.Linear(hidden, hidden)


class ResidualMLP(nn.Module):
    """x = act(input(x)); per block x = act(x + fc2(act(fc1(x)))); out = head(x).squeeze(-1)."""

    def __init__(self, inputs: int, hidden: int, blocks: int, activation: str):
        super().__init__()
        self.input = nn.Linear(inputs, hidden)
        self.blocks = nn.ModuleList(_Block(hidden) for _ in range(blocks))
        self.head = nn.Linear(hidden, 1)
        if activation == "relu":
            self.act = torch.relu
        elif activation == "silu":
            self.act = nn.functional.silu
        else:
            raise ValueError(f"unsupported activation {activation!r}")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # nn.Linear's own forward (F.linear of its weight and bias), called directly: the same
        # bits without nn.Module.__call__'s overhead per layer (the hook's cache miss, issue 19)
        act, linear = self.act, nn.functional.linear
        inp = self.input
        x = act(linear(x, inp.weight, inp.bias))
        for b in self.blocks:
            fc1, fc2 = b.fc1, b.fc2
            x = act(x + linear(act(linear(x, fc1.weight, fc1.bias)), fc2.weight, fc2.bias))
        head = self.head
        return linear(x, head.weight, head.bias).squeeze(-1)


class StackedMLP(nn.Module):
    """Several ResidualMLPs of one shape (an ensemble's members 1..N-1) run together: each
    layer's weights stacked [members, in, out] and applied by one batched matmul (baddbmm:
    bias + x W^T, as nn.Linear's addmm), so N - 1 members cost one forward's worth of torch
    calls instead of N - 1 (the calls, not the arithmetic, dominate on the few rows of a
    cascade: bench/hook_rank_speed.py (script removed; git history) --model). forward(x [rows, in]) -> [members, rows]."""

    def __init__(self, members: list[ResidualMLP]):
        super().__init__()
        if not members:
            raise ValueError("StackedMLP needs at least one member")
        self.act = members[0].act

        def stack(get) -> tuple[nn.Parameter, nn.Parameter]:
            lin = [get(m) for m in members]
            w = torch.stack([l.weight.detach().t() for l in lin]).contiguous()   # [M, in, out]
            b = torch.stack([l.bias.detach() for l in lin]).unsqueeze(1)         # [M, 1, out]
            return nn.Parameter(w, requires_grad=False), nn.Parameter(b, requires_grad=False)

        self.w_in, self.b_in = stack(lambda m: m.input)
        self.w1, self.b1, self.w2, self.b2 = nn.ParameterList(), nn.ParameterList(), nn.ParameterList(), nn.ParameterList()
        for i in range(len(members[0].blocks)):
            w, b = stack(lambda m: m.blocks[i].fc1)
            self.w1.append(w)
            self.b1.append(b)
            w, b = stack(lambda m: m.blocks[i].fc2)
            self.w2.append(w)
            self.b2.append(b)
        self.w_head, self.b_head = stack(lambda m: m.head)
        # the blocks' parameters as plain tuples (the same Parameter objects): iterating the
        # ParameterLists costs Python per item on every forward (issue 19's cache miss)
        self._blocks = tuple(zip(self.w1, self.b1, self.w2, self.b2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        act, baddbmm = self.act, torch.baddbmm
        w_in = self.w_in
        x = x.unsqueeze(0).expand(w_in.shape[0], -1, -1)
        x = act(baddbmm(self.b_in, x, w_in))
        for w1, b1, w2, b2 in self._blocks:
            x = act(x + baddbmm(b2, act(baddbmm(b1, x, w1)), w2))
        return baddbmm(self.b_head, x, self.w_head).squeeze(-1)
