"""``packing=true`` in the OPD loop (the student's update and the three models' scoring run padding-free):
the padded run's weights and diagnostics to fp32 rounding, in every reward mode (tests/scale/test_packing.py
explains the tolerance); and rows without signal get no forward in the update."""

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from shiftkit.opd.loop import OPDConfig, run_opd


def _cfg(trio, out, **kw) -> OPDConfig:
    base = dict(student=trio["student"], teacher=trio["teacher"], teacher_ref=trio["ref"], out=str(out),
                tasks=["add:1"], steps=2, prompts_per_step=2, samples_per_prompt=2, max_new_tokens=8, lr=1e-2,
                eval_every=0, progress=False, threads=1, guard_patience=0)
    return OPDConfig(**{**base, **kw})


def _rows(out):
    return [json.loads(x) for x in (Path(out) / "metrics.jsonl").read_text().splitlines()]


def _w(path):
    return load_file(str(Path(path) / "model.safetensors"))


@pytest.mark.parametrize("kw", [dict(reward_mode="student_topk", grpo_weight=0.5, samples_per_prompt=3),
                                dict(reward_mode="sampled", top_q=0.5, token_budget=20),
                                dict(reward_mode="full_vocab", clip_low=0.2, ppo_epochs=2),
                                dict(method="vanilla_opd", kl_mode="fixed", kl_coef=0.5)],
                         ids=["topk_outcome", "sampled_topq_budget", "full_vocab_offpolicy", "vanilla"])
def test_packed_opd_equals_padded(trio, tmp_path, monkeypatch, kw):
    from shiftkit.tasks import Mixture

    monkeypatch.setattr(Mixture, "reward", lambda self, problem, completion: float(len(completion)))
    pad = run_opd(_cfg(trio, tmp_path / "pad", **kw))
    pack = run_opd(_cfg(trio, tmp_path / "pack", packing=True, **kw))
    w0, w1, w2 = _w(trio["student"]), _w(pad["out"]), _w(pack["out"])
    num = sum(((w1[k] - w2[k]) ** 2).sum() for k in w1) ** 0.5
    den = sum(((w1[k] - w0[k]) ** 2).sum() for k in w1) ** 0.5
    assert den > 1e-4 and num / den < 1e-4, float(num / den)
    for a, b in zip(_rows(tmp_path / "pad"), _rows(tmp_path / "pack")):
        for k in ("reward/weighted_mean", "delta/mean", "delta/std", "entropy/student", "overlap/teacher_student", "kl/k3"):
            assert a[k] == pytest.approx(b[k], rel=1e-4, abs=1e-6), k


def test_opd_rows_without_signal_get_no_update_forward(trio, tmp_path, monkeypatch):
    # reward_scale=0 and no KL: the only signal is the GRPO outcome advantage (grpo_weight), which exists only
    # in groups whose rewards differ (odd answers here), so some rows carry a gradient and some none
    from shiftkit import microbatch as MB
    from shiftkit.tasks import Mixture

    monkeypatch.setattr(Mixture, "reward", lambda self, p, c: float(len(c)) if int(p.answer) % 2 else 0.0)
    kw = dict(reward_mode="student_topk", reward_scale=0.0, kl_mode="none", grpo_weight=1.0, prompts_per_step=4,
              samples_per_prompt=3, token_budget=1)
    run_opd(_cfg(trio, tmp_path / "drop", **kw))
    with monkeypatch.context() as mp:  # the reference: the update over every row
        mp.setattr(MB, "rows_with_gradient", lambda adv, *a, **k: torch.ones(adv.shape[0], dtype=torch.bool))
        run_opd(_cfg(trio, tmp_path / "all", **kw))
    rows = _rows(tmp_path / "drop")
    assert all(0 < r["update_rows"] < 12 for r in rows) and all(r["micro_batches"] == r["update_rows"] for r in rows)
    w0, a, b = _w(trio["student"]), _w(tmp_path / "drop" / "final"), _w(tmp_path / "all" / "final")
    assert any((a[k] - w0[k]).abs().max() > 0 for k in a)
    assert all((a[k] == b[k]).all() for k in a)  # one row per micro-batch: the dropped ones added exactly 0
    run_opd(_cfg(trio, tmp_path / "zero", **{**kw, "grpo_weight": 0.0}, steps=1))  # no signal at all
    row = _rows(tmp_path / "zero")[0]
    assert row["update_rows"] == 0 and row["micro_batches"] == 0 and row["grad_norm"] == 0
