"""Each loop honours the keys a mutant once silenced without a test noticing:

* ``autocast=bfloat16`` reaches the GRPO update's forward (the trainer's log-probs then differ from the fp32
  sampler's by bf16 rounding; in fp32 they agree);
* ``grad_checkpointing=true`` is on in every loop (GRPO, OPD, agentic RL, SFT: far fewer tensors saved for
  the backward);
* ``clip_high`` set alone clips (``clip_low=0``), in the GRPO and OPD loops; and ``shiftkit agent train``
  reads 0 as off like ``shiftkit rl`` (it once clamped the ratio at 1);
* a reward function's ``None`` gets advantage 0 in the loop (and gives none to its group);
* ``clip_dual`` reaches the loss; ``whiten_unbiased`` reaches the whitening.
"""

import json
from pathlib import Path

import pytest
import torch

from shiftkit import advantages, losses
from shiftkit.models import make_tiny_model, save_model
from shiftkit.rl import GRPOConfig, run_grpo


def _grpo(model, out, **kw) -> list[dict]:
    base = dict(model=model, out=str(out), tasks=["add:1"], steps=1, prompts_per_step=3, group_size=4,
                max_new_tokens=10, lr=1e-2, eval_every=0, progress=False, threads=1, save_every=0)
    run_grpo(GRPOConfig(**{**base, **kw}))
    return [json.loads(x) for x in (Path(out) / "metrics.jsonl").read_text().splitlines()]


def test_autocast_reaches_the_grpo_update(pico_dir, tmp_path, length_reward):
    fp32 = _grpo(pico_dir, tmp_path / "fp32")[0]
    bf16 = _grpo(pico_dir, tmp_path / "bf16", autocast="bfloat16")[0]
    # measured on this pico model: fp32 ~2e-8 (the same forward twice), bf16 ~3e-4 (bf16 rounding)
    assert fp32["rollout/logprob_gap"] < 1e-6  # the fp32 sampler and the fp32 trainer agree
    assert bf16["rollout/logprob_gap"] > 3e-5  # the update's forward ran under autocast
    packed = _grpo(pico_dir, tmp_path / "bf16p", autocast="bfloat16", packing=True)[0]
    assert packed["rollout/logprob_gap"] > 3e-5  # the packed forward too


def _saved_numel(fn) -> int:
    """Elements saved for the backward during ``fn()`` outside checkpointed regions (a checkpointed layer
    keeps its inputs only: its own hooks take over inside, and nothing inside reaches these)."""
    n = [0]

    def pack(x):
        n[0] += x.numel()
        return x

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda x: x):
        fn()
    return n[0]


@pytest.fixture
def opd_pair(tmp_path, tok) -> dict:
    """A teacher and a reference for the pico student (distinct random weights)."""
    out = {}
    for name, seed in (("teacher", 1), ("ref", 2)):
        save_model(make_tiny_model(_spec(), vocab_size=len(tok), seed=seed), tok, tmp_path / name)
        out[name] = str(tmp_path / name)
    return out


def _opd(pico_dir, pair, out, **kw) -> list[dict]:
    from shiftkit.opd.loop import OPDConfig, run_opd

    run_opd(OPDConfig(**{**dict(student=pico_dir, teacher=pair["teacher"], teacher_ref=pair["ref"], out=str(out),
                                tasks=["add:1"], steps=1, prompts_per_step=2, samples_per_prompt=2, max_new_tokens=8,
                                eval_every=0, progress=False, threads=1, guard_patience=0), **kw}))
    return [json.loads(x) for x in (Path(out) / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("loop", ["grpo", "opd", "agent", "sft"])
def test_grad_checkpointing_is_on_in_every_loop(tmp_path, pico_dir, opd_pair, length_reward, monkeypatch, loop):
    from shiftkit.agent import toytask as TT
    from shiftkit.agent.rl import AgenticRLConfig, run_agentic_rl
    from shiftkit.sft import SFTConfig, run_sft

    monkeypatch.setattr(TT.ToyEpisode, "reward", property(lambda self: float(len("".join(self.turns)) % 2)))

    def run(on: bool, name: str = ""):
        out = str(tmp_path / (name or f"{loop}_{on}"))
        if loop == "grpo":
            return _grpo(pico_dir, out, grad_checkpointing=on)
        if loop == "opd":
            return _opd(pico_dir, opd_pair, out, grad_checkpointing=on)
        if loop == "agent":
            return run_agentic_rl(AgenticRLConfig(out=out, warm_dir=str(tmp_path / "warm"), steps=1, warm_steps=5,
                                                  value_pretrain_steps=0, eval_n=2, eval_every=0, prompts_per_step=2,
                                                  group_size=2, max_turns=2, max_new_tokens=8, algo="grpo",
                                                  grad_checkpointing=on))
        return run_sft(SFTConfig(init="weak", out=out, tasks=["add:1"], steps=1, batch_size=4, lr=1e-3, warmup=0,
                                 progress=False, threads=1, grad_checkpointing=on))

    if loop == "agent":
        run(False, "warm_up")  # makes the warm start (cached): its own updates are not the loop's
    off, on = _saved_numel(lambda: run(False)), _saved_numel(lambda: run(True))
    assert off > 0 and on < 0.7 * off, (on, off)


def _spec():
    from shiftkit.models import TinyModelSpec

    return TinyModelSpec(hidden_size=32, num_hidden_layers=2, intermediate_size=64, num_attention_heads=4,
                         num_key_value_heads=2, head_dim=8)


def test_clip_high_alone_clips_in_the_grpo_and_opd_loops(pico_dir, opd_pair, tmp_path, length_reward):
    kw = dict(ppo_epochs=2, lr=3e-2)  # epoch 2 sees the epoch-1 update: ratios move off 1
    hi = _grpo(pico_dir, tmp_path / "hi", clip_low=0.0, clip_high=0.01, **kw)[0]
    free = _grpo(pico_dir, tmp_path / "free", **kw)[0]
    assert hi["reward"] == free["reward"] and free["clip_frac"] == 0
    assert hi["clip_frac"] > 0.01
    opd = _opd(pico_dir, opd_pair, tmp_path / "opd", clip_low=0.0, clip_high=0.01, lr=3e-2, ppo_epochs=2)[0]
    assert opd["clip_frac"] > 0.01


def test_agent_train_reads_clip_zero_as_off(tmp_path, monkeypatch):
    from shiftkit.agent import toytask as TT
    from shiftkit.agent.rl import AgenticRLConfig, run_agentic_rl

    monkeypatch.setattr(TT.ToyEpisode, "reward", property(lambda self: float(len("".join(self.turns)) % 2)))
    base = dict(warm_dir=str(tmp_path / "warm"), steps=2, warm_steps=20, value_pretrain_steps=0, eval_n=2,
                eval_every=0, prompts_per_step=3, group_size=2, max_turns=2, max_new_tokens=8, algo="grpo",
                ppo_epochs=2, lr=3e-3)

    def rows(out, **kw):
        run_agentic_rl(AgenticRLConfig(out=str(tmp_path / out), **base, **kw))
        return [json.loads(x) for x in (tmp_path / out / "metrics.jsonl").read_text().splitlines() if "loss" in x]

    clipped, off = rows("clipped", clip_low=0.01, clip_high=0.01), rows("off", clip_low=0.0, clip_high=0.0)
    assert [r["reward"] for r in clipped][:1] == [r["reward"] for r in off][:1]
    assert any(r["clip_frac"] > 0 for r in clipped)  # the ratios do move in epoch 2
    assert all(r["clip_frac"] == 0 for r in off)  # 0 = off: no clip at ratio 1


def test_none_rewards_get_no_advantage_in_the_loop(pico_dir, tmp_path):
    f = tmp_path / "none_reward.py"
    f.write_text("def none_some(prompts, completions, **kw):\n"
                 "    return [None if i % 4 == 1 else float(len(c)) for i, c in enumerate(completions)]\n")
    _grpo(pico_dir, tmp_path / "r", reward=[f"{f}:none_some"], samples_n=12, samples_every=1)
    samples = [json.loads(x) for x in (tmp_path / "r" / "samples.jsonl").read_text().splitlines()]
    assert len(samples) == 12
    assert all(s["advantage"] == 0 for s in samples if s["reward"] is None) and any(s["reward"] is None for s in samples)
    assert any(s["advantage"] != 0 for s in samples if s["reward"] is not None)
    for g in range(3):  # each group's advantages are over its scorable rows: they sum to 0 and match by hand
        grp = samples[4 * g: 4 * g + 4]
        r = torch.tensor([float("nan") if s["reward"] is None else s["reward"] for s in grp])
        assert torch.allclose(torch.tensor([s["advantage"] for s in grp]), advantages.group_advantages(r, 4), atol=1e-6)


def test_clip_dual_reaches_the_loss_and_whiten_unbiased_the_whitening(pico_dir, tmp_path, length_reward, monkeypatch):
    seen, real = [], losses.policy_loss
    monkeypatch.setattr(losses, "policy_loss", lambda *a, **k: seen.append(k.get("clip_dual")) or real(*a, **k))
    rows = _grpo(pico_dir, tmp_path / "dual", clip_low=0.2, clip_dual=3.0)
    assert seen and set(seen) == {3.0} and "dual_clip_frac" in rows[0]
    seen.clear()
    _grpo(pico_dir, tmp_path / "plain")
    assert set(seen) == {None}
    from shiftkit.agent.rl import AgenticRLConfig, run_agentic_rl

    flags, real_w = [], advantages.whiten
    monkeypatch.setattr(advantages, "whiten", lambda *a, **k: flags.append(k.get("unbiased")) or real_w(*a, **k))
    run_agentic_rl(AgenticRLConfig(out=str(tmp_path / "ppo"), warm_dir=str(tmp_path / "warm"), steps=1, warm_steps=5,
                                   value_pretrain_steps=0, eval_n=2, eval_every=0, prompts_per_step=2, group_size=2,
                                   max_turns=2, max_new_tokens=8, whiten_unbiased=True))
    assert flags == [True]
