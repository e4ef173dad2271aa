"""Agentic RL with its training rollouts from a served model (``rollout_url``): the run equals the
in-process run step for step (the server is synced to the policy before the first and after every
step), and the logged rollout-vs-trainer log-prob gap is ~0."""

import json
from pathlib import Path

import torch
from safetensors.torch import load_file

from shiftkit.agent import toytask as TT
from shiftkit.agent.rl import AgenticRLConfig, run_agentic_rl
from shiftkit.models import WEAK_SPEC, make_char_tokenizer, make_tiny_model
from shiftkit.serve import CompletionServer


def _cfg(out, warm, **kw) -> AgenticRLConfig:
    return AgenticRLConfig(out=str(out), warm_dir=str(warm), algo="grpo", steps=3, warm_steps=20, eval_n=2, eval_every=0,
                           prompts_per_step=2, group_size=2, max_turns=2, max_new_tokens=8, **kw)


def _rows(run_dir) -> list[dict]:
    rows = [json.loads(x) for x in (Path(run_dir) / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in r.items() if k != "step_time" and not k.startswith("rollout/")} for r in rows]


def test_served_rollouts_reproduce_the_in_process_run(tmp_path, monkeypatch):
    # the tiny warm policy never solves the task: reward the parity of what it wrote, so groups have signal
    monkeypatch.setattr(TT.ToyEpisode, "reward", property(lambda self: float(len("".join(self.turns)) % 2)))
    warm = tmp_path / "warm"
    run_agentic_rl(_cfg(tmp_path / "local", warm))
    tok = make_char_tokenizer()
    monkeypatch.setenv("SHIFTKIT_SERVE_TOKEN", "t0k")  # the server requires it on the weight route, the client sends it
    server = CompletionServer(make_tiny_model(WEAK_SPEC, seed=5), tok).start()  # other weights until the first sync
    try:
        run_agentic_rl(_cfg(tmp_path / "remote", warm, rollout_url=server.url))
    finally:
        server.stop()
    assert server.weight_version == 1 + 3  # the start, then after each step
    local, remote = _rows(tmp_path / "local"), _rows(tmp_path / "remote")
    assert any(r.get("has_signal") for r in local) and local == remote
    gaps = [json.loads(x) for x in (tmp_path / "remote" / "metrics.jsonl").read_text().splitlines()]
    gaps = [r["rollout/logprob_gap_max_abs"] for r in gaps if "rollout/logprob_gap_max_abs" in r]
    assert len(gaps) == 3 and max(gaps) < 1e-4
    a, b = (load_file(str(tmp_path / r / "final" / "model.safetensors")) for r in ("local", "remote"))
    assert all(torch.equal(a[k], b[k]) for k in a)
