"""The one-process reference of chapter 13's parallel training tests, from PyTorch alone: the same seeded Llama,
torch.optim.AdamW with weight decay on the matrices, the mean cross-entropy of each whole batch (never the package's
`train_reference`, which the tests check too)."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from attnbook.models.llama import Llama
from attnbook.parallel.toy import tiny_config


def reference_run(batches, config=None, *, seed: int, lr: float):
    """One process, whole batches: (losses, trained state) with plain PyTorch."""
    torch.manual_seed(seed)
    model = Llama(config or tiny_config()).double()
    params = list(model.parameters())
    optimizer = torch.optim.AdamW([{"params": [p for p in params if p.dim() >= 2], "weight_decay": 0.1},
                                   {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}],
                                  lr=lr, betas=(0.9, 0.95), eps=1e-8)
    losses = []
    for x, y in batches:
        optimizer.zero_grad()
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1))
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses, model.state_dict()
