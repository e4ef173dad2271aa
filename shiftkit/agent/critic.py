"""The critic of agentic PPO: a value model on the policy's backbone, and how far it is from the returns.

``V_t`` is read at the position that predicts token ``t`` (the state before generating it), aligned with
the policy's log-probs; only generated tokens (``gen_BT``) carry value targets (:mod:`shiftkit.agent.rl`).
"""

from __future__ import annotations

import copy

import torch

from shiftkit import losses
from shiftkit.sampling import _positions


class ValueModel(torch.nn.Module):
    """Critic: a causal-LM backbone (initialised from the policy) and a scalar head. ``V_t`` is read at
    the position that predicts token ``t`` (the state before generating it), aligned with the policy."""

    def __init__(self, causal_lm):
        super().__init__()
        self.backbone = copy.deepcopy(causal_lm.model)
        self.head = torch.nn.Linear(causal_lm.config.hidden_size, 1)
        torch.nn.init.zeros_(self.head.weight)
        torch.nn.init.zeros_(self.head.bias)

    def forward(self, batch: dict) -> torch.Tensor:
        P = batch["prompt_BP"].shape[1]
        ids = torch.cat([batch["prompt_BP"], batch["rest_BT"]], 1)
        mask = torch.cat([batch["pmask_BP"], batch["valid_BT"]], 1)
        h = self.backbone(input_ids=ids, attention_mask=mask, position_ids=_positions(mask)).last_hidden_state
        return self.head(h[:, P - 1:-1]).squeeze(-1)


def returns_mc(rewards_B: torch.Tensor, gen_BT: torch.Tensor) -> torch.Tensor:
    """The Monte Carlo (gamma = 1) return of every generated token: its trajectory's reward."""
    return torch.where(gen_BT.bool(), rewards_B[:, None].float().expand_as(gen_BT), torch.zeros(gen_BT.shape))


def critic_error(critic, batch: dict, rewards_B: torch.Tensor) -> dict:
    """MSE of V_t against the realised (Monte Carlo, gamma=1) return at every generated token, and the EV."""
    with torch.no_grad():
        v = critic(batch)
    ret = returns_mc(rewards_B, batch["gen_BT"])
    return {"mse": float(losses.masked_mean((v - ret).pow(2), batch["gen_BT"].bool())),
            "explained_variance": losses.explained_variance(v, ret, batch["gen_BT"])}
