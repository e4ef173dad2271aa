"""DAPO dynamic sampling (``dynamic_sampling=R``): refill rounds replace the groups without signal, within
the budget; the draws are functions of (seed, step, round), so a killed run resumes to the same weights."""

import json
from types import SimpleNamespace

import pytest
import torch
from safetensors.torch import load_file

from shiftkit import loopkit
from shiftkit.dist import Dist
from shiftkit.errors import ShiftkitError
from shiftkit.rewards import RewardResult
from shiftkit.rl import GRPOConfig, grpo_batch, run_grpo
from shiftkit.sampling import Rollouts

G = 2
SIGNAL = {0: {1}, 10: {0, 2}, 11: {3}, 12: {0, 1, 2, 3}}  # draw index -> groups whose rewards differ


def _fakes():
    """A data source, sampler and reward whose signal per (draw, group) is the table above."""
    draws = []

    def sample_fn(tok, prompts, group_size, seed, step, d, **kw):
        draws.append(step)
        mine = d.shard(list(range(len(prompts))))
        B = len(mine) * group_size
        texts = [f"{prompts[i]}/{j}" for i in mine for j in range(group_size)]
        ones = torch.ones(B, 1, dtype=torch.long)
        return mine, Rollouts(ones, ones, ones * 5, ones, torch.zeros(B, 1), torch.ones(B, dtype=torch.bool), texts)

    def score(examples, texts, step=0, completion_ids=None):
        total = []
        for t in texts:
            draw, i, j = (int(x) for x in t.replace("/", ":").split(":"))
            total.append(float(j % 2) if i in SIGNAL.get(draw, ()) else 0.0)
        return RewardResult(total, {"r": total}, {"reward": sum(total) / len(total)}, {})

    ds = SimpleNamespace(draw=lambda seed, step, n: [f"{step}:{i}" for i in range(n)])
    inp = SimpleNamespace(ds=ds, prompts_for=lambda ps: ps, rewards=SimpleNamespace(score=score))
    return inp, sample_fn, draws


def _batch(R: int):
    inp, sample_fn, draws = _fakes()
    cfg = GRPOConfig(model="m", steps=10, prompts_per_step=4, group_size=G, dynamic_sampling=R)
    b = grpo_batch(cfg, inp, SimpleNamespace(pad_token_id=0), sample_fn, 0, Dist())
    groups = [b.roll.texts[k * G].split("/")[0] for k in range(len(b.roll.texts) // G)]
    return b, groups, draws


def test_refill_rounds_replace_groups_without_signal_in_draw_order():
    b, groups, draws = _batch(3)
    assert draws == [0, 10, 11]  # refill round r of step s draws batch steps + s * R + r - 1; stops when full
    assert groups == ["0:1", "10:0", "10:2", "11:3"]
    assert b.metrics["dynamic/rounds"] == 3 and b.metrics["dynamic/frac_groups_with_signal"] == 1.0
    assert b.metrics["frac_groups_with_signal"] == 0.25  # the first round's, the policy's own rate
    assert b.metrics["reward"] == pytest.approx(1 / 8)  # the first round's mean reward
    assert [e for e in b.examples[::G]] == groups and b.rewards["total"][1::G] == [1.0] * 4
    assert (b.adv_B.view(-1, G) != 0).all()


def test_budget_caps_the_rounds_and_keeps_the_first_rounds_groups_to_fill():
    b, groups, draws = _batch(1)
    assert draws == [0, 10]
    assert groups == ["0:0", "0:1", "10:0", "10:2"]  # one round-0 group without signal fills the batch
    assert b.metrics["dynamic/rounds"] == 2 and b.metrics["dynamic/frac_groups_with_signal"] == 0.75
    plain, groups0, draws0 = _batch(0)
    assert draws0 == [0] and groups0 == ["0:0", "0:1", "0:2", "0:3"] and "dynamic/rounds" not in plain.metrics


def test_dynamic_sampling_is_validated():
    with pytest.raises(ShiftkitError, match="dynamic_sampling"):
        GRPOConfig(model="m", tasks=["add:1"], dynamic_sampling=-1).validate()


class Killed(Exception):
    pass


def test_grpo_run_with_dynamic_sampling_trains_on_more_signal_and_resumes(pico_dir, tmp_path, monkeypatch):
    from shiftkit.tasks import Mixture

    monkeypatch.setattr(Mixture, "reward", lambda self, p, c: float(len(c)) if int(p.answer) % 3 == 0 else 0.0)
    kw = dict(model=pico_dir, tasks=["add:1"], steps=3, prompts_per_step=4, group_size=4, max_new_tokens=10, lr=1e-2,
              eval_every=0, progress=False, threads=1, dynamic_sampling=3, save_every=1)
    run_grpo(GRPOConfig(out=str(tmp_path / "ref"), **kw))
    rows = [json.loads(x) for x in (tmp_path / "ref" / "metrics.jsonl").read_text().splitlines()]
    assert all(1 <= r["dynamic/rounds"] <= 4 for r in rows)
    assert any(r["dynamic/rounds"] > 1 for r in rows)
    assert all(r["dynamic/frac_groups_with_signal"] >= r["frac_groups_with_signal"] for r in rows)
    assert any(r["dynamic/frac_groups_with_signal"] > r["frac_groups_with_signal"] for r in rows)
    assert all(0 < r["update_rows"] <= 16 * r["dynamic/frac_groups_with_signal"] for r in rows)  # a row at its
    # group's mean reward has advantage 0 too
    real_log = loopkit.log_step

    def log_then_die(st, step, row, *a, **k):
        real_log(st, step, row, *a, **k)
        if step == 1:
            raise Killed

    with monkeypatch.context() as mp:
        mp.setattr(loopkit, "log_step", log_then_die)
        with pytest.raises(Killed):
            run_grpo(GRPOConfig(out=str(tmp_path / "run"), **kw))
    run_grpo(GRPOConfig(out=str(tmp_path / "run"), **kw))  # resumes from the step-1 checkpoint
    a, b = (load_file(str(tmp_path / x / "final" / "model.safetensors")) for x in ("ref", "run"))
    assert all(torch.equal(a[k], b[k]) for k in a)
