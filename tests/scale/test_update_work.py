"""No wasted update work, and a padding-free update, in the loops.

* Rows with advantage 0 and no KL carry exactly no gradient: the GRPO and agentic updates give them no
  forward or backward, with the loss normalisation unchanged, so the weights are the update over every
  row (bit for bit when each row is its own micro-batch, to fp32 rounding when the dropped rows shared a
  micro-batch with others: the matmuls then see fewer rows).
* A step with no such row runs no forward and no backward at all.
* ``packing=true`` gives the padded run's weights (GRPO, agentic PPO/GRPO; OPD: tests/opd/test_packing_opd.py)
  to fp32 rounding (tests/scale/test_packing.py explains the tolerance).
"""

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from shiftkit import logprobs
from shiftkit import microbatch as MB
from shiftkit.rl import GRPOConfig, run_grpo


@pytest.fixture
def partial_reward(monkeypatch):
    """Reward = completion length on problems with an odd answer, 0 on the others: some groups have signal,
    the rest none, whatever the (random) model says."""
    from shiftkit.tasks import Mixture

    monkeypatch.setattr(Mixture, "reward", lambda self, p, c: float(len(c)) if int(p.answer) % 2 else 0.0)


def _grpo(model, out, **kw) -> dict:
    base = dict(model=model, out=str(out), tasks=["add:1"], steps=2, prompts_per_step=4, group_size=4,
                max_new_tokens=10, lr=1e-2, eval_every=0, progress=False, threads=1, save_every=0)
    return run_grpo(GRPOConfig(**{**base, **kw}))


def _w(out) -> dict:
    return load_file(str(Path(out) / "final" / "model.safetensors"))


def _rows(out) -> list[dict]:
    return [json.loads(x) for x in (Path(out) / "metrics.jsonl").read_text().splitlines()]


def _rel(a: dict, b: dict, w0: dict) -> float:
    """|a - b| relative to the update |a - w0| (Adam can turn rounding in a near-zero gradient into a step)."""
    num = sum(((a[k] - b[k]) ** 2).sum() for k in a) ** 0.5
    den = sum(((a[k] - w0[k]) ** 2).sum() for k in a) ** 0.5
    assert den > 1e-4  # it trained
    return float(num / den)


def _every_row(monkeypatch):
    """The reference: the update over every row, as before rows were dropped."""
    monkeypatch.setattr(MB, "rows_with_gradient", lambda adv, *a, **k: torch.ones(adv.shape[0], dtype=torch.bool))


def _forwards(monkeypatch) -> list:
    calls, real = [], logprobs.model_head
    monkeypatch.setattr(logprobs, "model_head", lambda *a, **k: calls.append(1) or real(*a, **k))
    return calls


@pytest.mark.parametrize("budget", [1, 0], ids=["row_per_micro_batch", "one_micro_batch"])
@pytest.mark.parametrize("kw", [dict(), dict(clip_low=0.2, ppo_epochs=2, aggregation="seq_mean")],
                         ids=["reinforce", "ppo_seqmean"])
def test_rows_without_signal_get_no_forward_and_the_weights_are_the_full_update(pico_dir, tmp_path, partial_reward,
                                                                              monkeypatch, budget, kw):
    calls = _forwards(monkeypatch)
    _grpo(pico_dir, tmp_path / "drop", token_budget=budget, **kw)
    n_drop = len(calls)
    with monkeypatch.context() as mp:
        _every_row(mp)
        _grpo(pico_dir, tmp_path / "all", token_budget=budget, **kw)
    n_all = len(calls) - n_drop
    drop, every = _rows(tmp_path / "drop"), _rows(tmp_path / "all")
    assert all(0 < r["update_rows"] < 16 for r in drop)  # some rows dropped, some trained, at every step
    assert [r["update_rows"] for r in every] == [16, 16]
    assert [r["reward"] for r in drop] == [r["reward"] for r in every]  # same samples
    if budget == 1:  # one forward (and backward) per trained row and epoch, plus the scoring when off-policy
        passes = (2 if kw else 1) + (1 if kw else 0)
        assert n_drop == passes * sum(r["update_rows"] for r in drop) and n_all == passes * 16 * 2
    a, b = _w(tmp_path / "drop"), _w(tmp_path / "all")
    if budget == 1:  # the dropped micro-batches' gradients were exactly 0
        assert all(torch.equal(a[k], b[k]) for k in a)
    else:
        assert _rel(a, b, load_file(str(Path(pico_dir) / "model.safetensors"))) < 1e-5
    for x, y in zip(drop, every):
        assert x["loss"] == pytest.approx(y["loss"], abs=1e-6) and x["clip_frac"] == pytest.approx(y["clip_frac"])


def test_a_step_without_signal_runs_no_forward_or_backward(pico_dir, tmp_path, monkeypatch):
    from shiftkit.tasks import Mixture

    monkeypatch.setattr(Mixture, "reward", lambda self, p, c: 1.0)  # every group all-equal: no signal anywhere
    calls = _forwards(monkeypatch)
    _grpo(pico_dir, tmp_path / "none", clip_low=0.2, ppo_epochs=2)  # off-policy: even the scoring is skipped
    assert calls == []
    rows = _rows(tmp_path / "none")
    assert all(r["micro_batches"] == 0 and r["update_rows"] == 0 and r["grad_norm"] == 0 for r in rows)
    assert "entropy" not in rows[0] and "rollout/logprob_gap" not in rows[0]  # measured on trained rows only
    w0 = load_file(str(Path(pico_dir) / "model.safetensors"))
    assert all(torch.equal(w0[k], v) for k, v in _w(tmp_path / "none").items())
    calls.clear()
    _grpo(pico_dir, tmp_path / "kl", kl_coef=0.1, steps=1)  # a KL term is a gradient: every row runs
    assert _rows(tmp_path / "kl")[0]["update_rows"] == 16 and len(calls) > 0


@pytest.mark.parametrize("kw", [dict(token_budget=0), dict(token_budget=60, kl_coef=0.1, clip_low=0.2, ppo_epochs=2)],
                         ids=["one_batch", "budget_kl_ppo"])
def test_packed_grpo_run_equals_padded_run(pico_dir, tmp_path, partial_reward, kw):
    _grpo(pico_dir, tmp_path / "pad", **kw)
    _grpo(pico_dir, tmp_path / "pack", packing=True, **kw)
    pad, pack = _rows(tmp_path / "pad"), _rows(tmp_path / "pack")
    assert [r["reward"] for r in pad] == [r["reward"] for r in pack]
    if kw["token_budget"]:
        assert 2 < sum(r["micro_batches"] for r in pack) <= sum(r["micro_batches"] for r in pad)  # no padding counted
    w0 = load_file(str(Path(pico_dir) / "model.safetensors"))
    assert _rel(_w(tmp_path / "pad"), _w(tmp_path / "pack"), w0) < 1e-4
    for a, b in zip(pad, pack):
        for k in ("loss", "kl", "clip_frac", "entropy", "rollout/logprob_gap"):
            assert a[k] == pytest.approx(b[k], rel=1e-4, abs=1e-6), k


@pytest.mark.parametrize("algo", ["ppo", "grpo"])
def test_packed_agent_run_equals_padded_run(tmp_path, monkeypatch, algo):
    from shiftkit.agent import toytask as TT
    from shiftkit.agent.rl import AgenticRLConfig, run_agentic_rl

    monkeypatch.setattr(TT.ToyEpisode, "reward", property(lambda self: float(len("".join(self.turns)) % 2)))
    base = dict(warm_dir=str(tmp_path / "warm"), steps=2, warm_steps=20, value_pretrain_steps=2,
                value_pretrain_batches=1, eval_n=2, eval_every=0, prompts_per_step=3, group_size=2, max_turns=2,
                max_new_tokens=8, algo=algo)
    run_agentic_rl(AgenticRLConfig(out=str(tmp_path / "pad"), **base))
    run_agentic_rl(AgenticRLConfig(out=str(tmp_path / "pack"), packing=True, **base))
    w0 = load_file(str(tmp_path / "warm" / "model.safetensors"))
    assert _rel(_w(tmp_path / "pad"), _w(tmp_path / "pack"), w0) < 1e-4
