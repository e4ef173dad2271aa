"""The Direct-OPD loop on tiny random models: metrics, modes, baselines, stages, preflight, guard."""

import json
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from shiftkit.errors import ShiftkitError
from shiftkit.opd.loop import OPDConfig, run_opd

PHASES = ("time/sample", "time/student_forward", "time/teacher_score", "time/ref_score", "time/update")
DIAG = ("delta/mean", "delta/std", "delta/pos_frac", "reward/weighted_mean", "kl/alpha", "kl/k3",
        "student/topk_mass", "overlap/teacher_student", "overlap/ref_student", "entropy/student", "entropy/teacher",
        "entropy/ref", "response_len", "eos_rate", "reward")


def _cfg(trio, out, **kw) -> OPDConfig:
    base = dict(student=trio["student"], teacher=trio["teacher"], teacher_ref=trio["ref"], out=str(out),
                tasks=["add:1"], steps=3, prompts_per_step=2, samples_per_prompt=2, max_new_tokens=8, lr=1e-3,
                eval_every=0, progress=False, threads=1, guard_patience=0)
    base.update(kw)
    return OPDConfig(**base)


def _rows(out):
    return [json.loads(l) for l in (Path(out) / "metrics.jsonl").read_text().splitlines()]


def _w(path):
    return load_file(str(Path(path) / "model.safetensors"))


def _changed(a, b) -> float:
    wa, wb = _w(a), _w(b)
    return max((wa[k] - wb[k]).abs().max().item() for k in wa)


@pytest.mark.parametrize("mode", ["student_topk", "sampled", "full_vocab"])
def test_each_reward_mode_trains_and_logs_every_diagnostic(trio, tmp_path, mode):
    s = run_opd(_cfg(trio, tmp_path / "r", reward_mode=mode))
    rows = _rows(tmp_path / "r")
    assert [r["step"] for r in rows] == [0, 1, 2]
    for k in PHASES + DIAG:
        assert k in rows[0], k
    assert rows[0]["kl/k3"] == pytest.approx(0.0, abs=1e-6)  # anchor = the policy that sampled step 0
    assert (tmp_path / "r" / "DONE").exists() and s["determinism_gap"] < 1e-4
    assert _changed(trio["student"], s["out"]) > 0


def test_adaptive_alpha_follows_the_sign_of_the_weighted_reward(trio, tmp_path):
    run_opd(_cfg(trio, tmp_path / "r", steps=4, kl_coef=1.0))
    a = 1.0
    for r in _rows(tmp_path / "r"):
        a = a * (1.01 if r["reward/weighted_mean"] > 0 else 0.99)
        assert r["kl/alpha"] == pytest.approx(a)


def test_fixed_alpha_and_options_run(trio, tmp_path):
    run_opd(_cfg(trio, tmp_path / "r", kl_mode="fixed", kl_coef=0.7, clip_low=0.2, ppo_epochs=2, top_q=0.3,
                 delta_clip=1.0, reward_scale=2.0, grpo_weight=0.5, samples_per_prompt=3))
    rows = _rows(tmp_path / "r")
    assert all(r["kl/alpha"] == 0.7 for r in rows)


def test_vanilla_opd_and_grpo_baselines_run(trio, tmp_path):
    s = run_opd(_cfg(trio, tmp_path / "v", method="vanilla_opd", teacher_ref=""))
    assert _changed(trio["student"], s["out"]) > 0 and "ref_score" not in json.dumps(s)
    g = run_opd(_cfg(trio, tmp_path / "g", method="grpo", teacher="", teacher_ref=""))
    assert g["method"] == "grpo" and (tmp_path / "g" / "DONE").exists()


def test_two_stages_reanchor_and_checkpoint_each_stage(trio, tmp_path):
    st = [{"teacher": trio["teacher"], "teacher_ref": trio["ref"], "steps": 2},
          {"teacher": trio["ref"], "teacher_ref": trio["teacher"], "steps": 2, "kl_mode": "fixed", "kl_coef": 1.5}]
    cfg = _cfg(trio, tmp_path / "c", teacher="", teacher_ref="", stages=st, lr=1e-2)
    s = run_opd(cfg)
    for sub in ("stage0", "stage1", "."):
        assert (tmp_path / "c" / sub / "final" / "model.safetensors").exists()
    assert (tmp_path / "c" / "DONE").exists() and s["steps"] == 4
    r1 = _rows(tmp_path / "c" / "stage1")
    # KL re-anchored at the stage's start: 0 at its first step although stage 0 moved the weights
    assert r1[0]["kl/k3"] == pytest.approx(0.0, abs=1e-6) and r1[0]["global_step"] == 2
    assert all(r["kl/alpha"] == 1.5 for r in r1)
    assert _changed(trio["student"], tmp_path / "c" / "stage0" / "final") > 0
    assert _changed(tmp_path / "c" / "stage0" / "final", tmp_path / "c" / "final") > 0


def test_preflight_teacher_equal_to_reference_errors_before_writing(trio, tmp_path):
    with pytest.raises(ShiftkitError, match="identical weights"):
        run_opd(_cfg(trio, tmp_path / "r", teacher_ref=trio["teacher"]))
    copy = tmp_path / "copy"
    shutil.copytree(trio["teacher"], copy)
    with pytest.raises(ShiftkitError, match="identical weights"):
        run_opd(_cfg(trio, tmp_path / "r", teacher_ref=str(copy)))
    assert not (tmp_path / "r").exists()


def test_preflight_tokenizer_mismatch_names_tokens_and_can_be_overridden(trio, swapped_vocab_model, tmp_path):
    with pytest.raises(ShiftkitError, match=r"'a' \(student 69, teacher 70\)"):
        run_opd(_cfg(trio, tmp_path / "r", teacher=swapped_vocab_model))
    assert not (tmp_path / "r").exists()
    run_opd(_cfg(trio, tmp_path / "r", teacher=swapped_vocab_model, allow_tokenizer_mismatch=True, steps=1))


def test_determinism_self_test_fails_with_an_impossible_tolerance(trio, tmp_path):
    from shiftkit.models import load_model_and_tokenizer
    from shiftkit.opd.preflight import determinism_gap

    s, tok = load_model_and_tokenizer(trio["student"])
    t, _ = load_model_and_tokenizer(trio["teacher"])
    gap = determinism_gap({"t": t}, s, tok, ["1+2=", "3+4=", "9+9="], "float32")
    assert 0 <= gap < 1e-4
    with pytest.raises(ShiftkitError, match="determinism self-test failed"):
        run_opd(_cfg(trio, tmp_path / "r", determinism_tol=-1.0))


def test_collapse_guard_stops_without_marking_done(trio, tmp_path):
    with pytest.raises(ShiftkitError, match="collapse guard"):
        run_opd(_cfg(trio, tmp_path / "r", guard_patience=2, guard_min_eos_rate=1.01, steps=5))
    assert not (tmp_path / "r" / "DONE").exists()
    assert len(_rows(tmp_path / "r")) == 2


def test_config_errors():
    with pytest.raises(ShiftkitError, match="teacher_ref"):
        OPDConfig(student="s", teacher="t").validate()
    with pytest.raises(ShiftkitError, match="reward_mode"):
        OPDConfig(student="s", teacher="t", teacher_ref="r", reward_mode="topk").validate()
    with pytest.raises(ShiftkitError, match="unknown key 'lr_x'"):
        OPDConfig(student="s", stages=[{"teacher": "t", "teacher_ref": "r", "lr_x": 1}]).validate()


@pytest.mark.parametrize("method", ["direct_opd", "vanilla_opd"])
def test_kl_anchor_is_scored_at_the_sampling_temperature(trio, tmp_path, method):
    # the anchor is the student itself at step 0, so KL(student_T || anchor_T) must be 0 at any T;
    # scored at temperature 1 it would not be (the student's log-probs are at T)
    ref = trio["ref"] if method == "direct_opd" else ""
    run_opd(_cfg(trio, tmp_path / "r", method=method, teacher_ref=ref, temperature=0.5, steps=1,
                 kl_mode="fixed", kl_coef=1.0))
    assert _rows(tmp_path / "r")[0]["kl/k3"] == pytest.approx(0.0, abs=1e-6)


def test_kl_clamp_flag_reaches_the_kl_penalty(trio, tmp_path, monkeypatch):
    from shiftkit import losses

    seen, real = [], losses.kl_penalty
    monkeypatch.setattr(losses, "kl_penalty", lambda *a, **k: seen.append(k.get("clamp")) or real(*a, **k))
    run_opd(_cfg(trio, tmp_path / "on", steps=1))
    run_opd(_cfg(trio, tmp_path / "off", steps=1, kl_clamp=False))
    assert seen == [True, False]
