"""The agentic RL loop on the training kit: a run killed after a checkpoint resumes to the same weights
and metrics (critic included), and GRPO skips the optimizer step on a batch without signal."""

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from shiftkit import loopkit
from shiftkit.agent import toytask as TT
from shiftkit.agent.rl import AgenticRLConfig, run_agentic_rl


def _cfg(out, warm, **kw) -> AgenticRLConfig:
    base = dict(out=str(out), warm_dir=str(warm), steps=4, warm_steps=20, value_pretrain_steps=2,
                value_pretrain_batches=1, eval_n=2, eval_every=0, prompts_per_step=2, group_size=2, max_turns=2,
                max_new_tokens=8)
    return AgenticRLConfig(**{**base, **kw})


def _weights(run_dir) -> dict:
    return load_file(str(Path(run_dir) / "final" / "model.safetensors"))


def _rows(run_dir) -> list[dict]:
    rows = [json.loads(x) for x in (Path(run_dir) / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in r.items() if k != "step_time"} for r in rows]


@pytest.fixture
def varied_reward(monkeypatch):
    """The tiny warm policy never solves the task: reward the parity of what it wrote instead, so
    groups have signal and the critic has targets."""
    monkeypatch.setattr(TT.ToyEpisode, "reward", property(lambda self: float(len("".join(self.turns)) % 2)))


class Killed(Exception):
    pass


@pytest.mark.slow
def test_killed_run_resumes_to_the_same_weights_and_metrics(tmp_path, varied_reward, monkeypatch):
    warm = tmp_path / "warm"
    ref = run_agentic_rl(_cfg(tmp_path / "ref", warm, save_every=2))
    assert any(r.get("has_signal") for r in _rows(tmp_path / "ref"))
    real_log = loopkit.log_step

    def log_then_die(st, step, row, *a, **k):  # dies after logging step 2, past the checkpoint at step 2
        real_log(st, step, row, *a, **k)
        if step == 2:
            raise Killed

    with monkeypatch.context() as mp:
        mp.setattr(loopkit, "log_step", log_then_die)
        with pytest.raises(Killed):
            run_agentic_rl(_cfg(tmp_path / "run", warm, save_every=2))
    run = tmp_path / "run"
    assert not (run / "DONE").exists() and any((run / "checkpoints").glob("step_*/trainer_state.pt"))
    again = run_agentic_rl(_cfg(run, warm, save_every=2))
    a, b = _weights(tmp_path / "ref"), _weights(run)
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert _rows(tmp_path / "ref") == _rows(run)  # the step-2 row was dropped and redone, value loss included
    assert [r["step"] for r in _rows(run)] == [0, 1, 2, 3, 4]  # the eval before any update, then 1-based
    for k in ("reward_first", "reward_last", "initial_eval", "final_eval", "value_pretrain"):
        assert ref[k] == again[k], k
    assert run_agentic_rl(_cfg(run, warm, save_every=2))["final_eval"] == ref["final_eval"]  # DONE: returns the summary


def test_grpo_batch_without_signal_does_not_move_the_policy(tmp_path, monkeypatch):
    # step 0: rewards 0/1 alternating (signal); step 1: all 0. The 2-step run must end with exactly the
    # 1-step run's weights: Adam's momentum would move them if the no-signal step were not skipped.
    B, n_eval = 2 * 2, 2

    def run(out, steps):
        calls = iter(range(10**6))
        monkeypatch.setattr(TT.ToyEpisode, "reward", property(
            lambda self: (lambda i: float(i % 2) if n_eval <= i < n_eval + B else 0.0)(next(calls))))
        run_agentic_rl(_cfg(out, tmp_path / "warm", algo="grpo", steps=steps))
        return _weights(out), _rows(out)

    (one, _), (two, rows) = run(tmp_path / "one", 1), run(tmp_path / "two", 2)
    assert [r.get("has_signal") for r in rows[1:]] == [True, False]
    assert all(torch.equal(one[k], two[k]) for k in one)


@pytest.mark.parametrize("algo", ["ppo", "grpo"])
def test_micro_batched_agent_update_equals_one_batch(tmp_path, varied_reward, algo):
    """token_budget splits the policy and the critic update into micro-batches; weights match the one-batch run."""
    warm = tmp_path / "warm"
    one = run_agentic_rl(_cfg(tmp_path / "one", warm, algo=algo, steps=2, prompts_per_step=3))
    mb = run_agentic_rl(_cfg(tmp_path / "mb", warm, algo=algo, steps=2, prompts_per_step=3, token_budget=60,
                             logit_chunk=7))
    assert all(r["micro_batches"] >= 2 for r in _rows(tmp_path / "mb") if "loss" in r)
    w0 = load_file(str(warm / "model.safetensors"))
    w1, w2 = _weights(tmp_path / "one"), _weights(tmp_path / "mb")
    num = sum(((w1[k] - w2[k]) ** 2).sum() for k in w1) ** 0.5
    den = sum(((w1[k] - w0[k]) ** 2).sum() for k in w1) ** 0.5
    assert den > 1e-5 and num / den < 1e-4, (float(den), float(num / den))
    for a, b in zip(*([r for r in _rows(tmp_path / x) if "loss" in r] for x in ("one", "mb"))):
        assert a["reward"] == b["reward"]
        for k in ("loss", "entropy") + (("value_loss", "value_mse") if algo == "ppo" else ()):
            assert a[k] == pytest.approx(b[k], rel=1e-4, abs=1e-6), k
