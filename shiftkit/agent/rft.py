"""Rejection fine-tuning (RFT) data: keep only clean, successful agent trajectories and turn them into
a chat-format SFT dataset; train on it with the loss on assistant tokens only.

:func:`rft_verdict` is the filter (pure, on a trajectory's events): positive final reward, the episode
finished by calling ``finish``, no malformed tool calls, no repeated action in an unchanged workspace
(loops), no sandbox or read-only violations, no tool timeouts (invalid behaviour).
"""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path

import torch

from shiftkit.agent.batches import chat_examples, masked_sft_step
from shiftkit.agent.trajectory import end_of, load_trajectory, messages_of, validate_trajectory


def rft_verdict(events: list[dict]) -> tuple[bool, str]:
    end = end_of(events)
    if not end or validate_trajectory(events):
        return False, "invalid_trajectory"
    c = end["counts"]
    checks = [
        (end["final_reward"] is not None, "unscorable"),
        (end["final_reward"] is not None and end["final_reward"] > 0, "non_positive_reward"),
        (end["outcome"] == "finished", f"outcome_{end['outcome']}"),
        (c["malformed"] == 0, "malformed_calls"),
        (c["repeated_calls"] == 0, "loops"),
        (c["sandbox_violations"] == 0 and c.get("read_only", 0) == 0, "invalid_behaviour"),
        (c["timeouts"] == 0, "tool_timeouts"),
    ]
    for ok, why in checks:
        if not ok:
            return False, why
    return True, "kept"


def build_rft_dataset(paths: list[str | Path], out: str | Path) -> dict:
    """Filter trajectory files into ``out`` (JSONL rows ``{"messages", "tools", "reward", "source"}``)."""
    kept, why = [], Counter()
    for p in paths:
        ev = load_trajectory(p)
        ok, reason = rft_verdict(ev)
        why[reason] += 1
        if ok:
            kept.append({"messages": messages_of(ev), "tools": ev[0]["tools"], "reward": end_of(ev)["final_reward"], "source": str(p)})
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_text("".join(json.dumps(r) + "\n" for r in kept))
    return {"trajectories": len(paths), "kept": len(kept), "reasons": dict(why), "out": str(out)}


def train_rft(model, tok, rows: list[dict], steps: int, lr: float = 1e-3, batch_size: int = 4, seed: int = 0,
              max_len: int = 0) -> list[float]:
    """SFT on the kept trajectories, loss on assistant tokens only (:func:`shiftkit.agent.batches.masked_sft_step`)."""
    ex = chat_examples(tok, rows, max_len)
    if not ex:
        return []
    rng = random.Random(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    model.train()
    return [masked_sft_step(model, opt, [ex[rng.randrange(len(ex))] for _ in range(batch_size)], tok.pad_token_id)
            for _ in range(steps)]
