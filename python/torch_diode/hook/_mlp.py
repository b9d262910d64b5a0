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
        act = self.act
        x = act(self.input(x))
        for b in self.blocks:
            x = act(x + b.fc2(act(b.fc1(x))))
        return self.head(x).squeeze(-1)
