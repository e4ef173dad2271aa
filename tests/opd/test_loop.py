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
    assert [r["step"] for r in rows] == [1, 2, 3]
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


# ---- each option has its documented effect, on the same step-0 samples --------------------------
#
# Step 0 of every run below samples the same rollouts (same student, seeds and prompts), so the
# per-token advantages the loss receives can be compared across options. The spies record what the
# loop passes to the sampler and to candidate_policy_loss (one call per PPO epoch).

def _capture(cfg) -> dict:
    from shiftkit import loopkit, losses

    cap = {"roll": [], "calls": []}
    real_sample, real_loss = loopkit.sample, losses.candidate_policy_loss

    def sample(*a, **k):
        cap["roll"].append(real_sample(*a, **k))
        return cap["roll"][-1]

    def loss(lp, old, adv, mask, **k):
        cap["calls"].append({"lp": lp.detach().clone(), "old": old.detach().clone(), "adv": adv.detach().clone(),
                             "mask": mask.bool().clone(), **k})
        return real_loss(lp, old, adv, mask, **k)

    from shiftkit.opd import loop

    real_signal = loop.opd_signal
    cap["signal"] = []

    def signal(*a, **k):
        cap["signal"].append(real_signal(*a, **k))
        return cap["signal"][-1]

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(loopkit, "sample", sample)
        mp.setattr(losses, "candidate_policy_loss", loss)
        mp.setattr(loop, "opd_signal", signal)
        run_opd(cfg)
    cap["rows"] = _rows(cfg.out)
    return cap


def _logp(path, roll) -> torch.Tensor:
    """Independent scoring of the captured rollouts: full log-softmax ``[B, T, V]`` of one model."""
    from shiftkit.models import load_model_and_tokenizer
    from shiftkit.sampling import forward_logits

    m, _ = load_model_and_tokenizer(path)
    with torch.no_grad():
        return forward_logits(m, roll.prompt_ids_BP, roll.prompt_mask_BP, roll.completion_ids_BT,
                              roll.completion_mask_BT).log_softmax(-1)


def test_reward_modes_give_their_documented_advantages_on_the_same_samples(trio, tmp_path):
    caps = {m: _capture(_cfg(trio, tmp_path / m, reward_mode=m, steps=1, top_k=5)) for m in
            ("sampled", "student_topk", "full_vocab")}
    roll = caps["sampled"]["roll"][0]
    for c in caps.values():  # the same samples in every mode
        assert torch.equal(c["roll"][0].completion_ids_BT, roll.completion_ids_BT)
    s, t, r = (_logp(trio[k], roll) for k in ("student", "teacher", "ref"))
    m = roll.completion_mask_BT.bool()
    delta = t - r  # Delta(v | s_t) = log pi_teacher - log pi_ref, [B, T, V]
    want = {  # tests/oracles.py direct_opd: adv = sg[w * Delta] per candidate
        "sampled": delta.gather(-1, roll.completion_ids_BT.unsqueeze(-1)),  # w = 1, K = 1
        "student_topk": (lambda ids: s.gather(-1, ids).softmax(-1) * delta.gather(-1, ids))(s.topk(5, -1).indices),
        "full_vocab": s.exp() * delta,  # w = the student's exact probabilities, K = V
    }
    got = {k: c["calls"][0]["adv"] for k, c in caps.items() if k != "full_vocab"}
    for k in got:  # the advantages the loss receives, at the candidates
        assert got[k].shape == want[k].shape, k
        torch.testing.assert_close(got[k][m], want[k][m], rtol=1e-4, atol=1e-6)
    # full_vocab never builds [B, T, V]: its per-position expected reward sum_v adv_v is the check
    per_pos = {k: c["signal"][0].reward_BT[m] for k, c in caps.items()}
    torch.testing.assert_close(per_pos["full_vocab"], want["full_vocab"].sum(-1)[m], rtol=1e-4, atol=1e-6)
    for k in got:
        torch.testing.assert_close(per_pos[k], want[k].sum(-1)[m], rtol=1e-4, atol=1e-6)
    # and they are different signals: per-position expected reward sum_k adv_k differs between modes
    assert (per_pos["sampled"] - per_pos["student_topk"]).abs().max() > 1e-3
    assert (per_pos["student_topk"] - per_pos["full_vocab"]).abs().max() > 1e-3
    wr = {k: c["rows"][0]["reward/weighted_mean"] for k, c in caps.items()}
    assert len({round(v, 6) for v in wr.values()}) == 3


def test_top_q_keeps_the_reward_at_the_top_jsd_fraction_of_positions(trio, tmp_path):
    import math

    from shiftkit import logprobs

    full = _capture(_cfg(trio, tmp_path / "q1", steps=1))
    part = _capture(_cfg(trio, tmp_path / "q03", steps=1, top_q=0.3))
    roll = full["roll"][0]
    m = roll.completion_mask_BT.bool()
    a1, aq = full["calls"][0]["adv"], part["calls"][0]["adv"]
    assert (a1.abs().sum(-1) > 0)[m].all()  # top_q=1: a reward at every valid position
    kept = (aq.abs().sum(-1) > 0) & m
    jsd = logprobs.jsd_from_logits(_logp(trio["teacher"], roll), _logp(trio["ref"], roll))
    for b in range(m.shape[0]):
        n = int(m[b].sum())
        assert int(kept[b].sum()) == math.ceil(0.3 * n)  # ceil(top_q * n_valid) positions per row
        top = jsd[b][m[b]].topk(math.ceil(0.3 * n)).indices
        assert set(top.tolist()) == set(kept[b][m[b]].nonzero().squeeze(-1).tolist())  # the largest JSD
    torch.testing.assert_close(aq[kept], a1[kept], rtol=0, atol=0)  # masked, not rescaled


def test_reward_scale_and_delta_clip_shape_the_reward(trio, tmp_path):
    plain = _capture(_cfg(trio, tmp_path / "p", steps=1, reward_mode="sampled"))
    shaped = _capture(_cfg(trio, tmp_path / "s", steps=1, reward_mode="sampled", reward_scale=2.0, delta_clip=0.05))
    m = plain["roll"][0].completion_mask_BT.bool()
    a, b = plain["calls"][0]["adv"][m], shaped["calls"][0]["adv"][m]
    assert (a.abs() > 0.05).any() and (a.abs() < 0.05).any()  # both branches of the clip are exercised
    torch.testing.assert_close(b, 2.0 * a.clamp(-0.05, 0.05), rtol=1e-6, atol=1e-7)


def test_grpo_weight_adds_the_outcome_advantage_as_one_more_candidate(trio, tmp_path, monkeypatch):
    from shiftkit.tasks import Mixture

    # random models never solve a task: make the outcome reward the completion length, so it varies
    monkeypatch.setattr(Mixture, "reward", lambda self, problem, completion: float(len(completion)))
    kw = dict(steps=1, samples_per_prompt=3, top_k=4)
    base = _capture(_cfg(trio, tmp_path / "b", **kw))
    half = _capture(_cfg(trio, tmp_path / "h", grpo_weight=0.5, **kw))
    roll = base["roll"][0]
    m = roll.completion_mask_BT.bool()
    a0, ah = base["calls"][0]["adv"], half["calls"][0]["adv"]
    assert a0.shape[-1] == 4 and ah.shape[-1] == 5
    torch.testing.assert_close(ah[..., :4][m], a0[m], rtol=0, atol=0)  # the dense signal is unchanged
    out_B = torch.tensor([float(len(t)) for t in roll.texts])
    from shiftkit import advantages

    want_B = 0.5 * advantages.group_advantages(out_B, 3)  # w * GRPO advantage of each sequence
    assert want_B.abs().max() > 0
    torch.testing.assert_close(ah[..., 4][m], want_B[:, None].expand(m.shape)[m], rtol=1e-5, atol=1e-6)
    lp_sampled = _logp(trio["student"], roll).gather(-1, roll.completion_ids_BT.unsqueeze(-1)).squeeze(-1)
    torch.testing.assert_close(half["calls"][0]["lp"][..., 4][m], lp_sampled[m], rtol=1e-4, atol=1e-5)


def test_ppo_epochs_and_clip_reuse_the_batch_with_old_logprobs(trio, tmp_path):
    clip = _capture(_cfg(trio, tmp_path / "c", steps=1, clip_low=0.2, ppo_epochs=2, lr=3e-2))
    free = _capture(_cfg(trio, tmp_path / "f", steps=1, ppo_epochs=2, lr=3e-2))
    one = _capture(_cfg(trio, tmp_path / "o", steps=1, lr=3e-2))
    assert len(clip["calls"]) == 2 and len(one["calls"]) == 1  # one loss per epoch
    e1, e2 = clip["calls"]
    m = e1["mask"]
    torch.testing.assert_close(e1["lp"][m], e1["old"][m])  # epoch 1: ratio 1
    torch.testing.assert_close(e2["old"][m], e1["old"][m])  # epoch 2: same old log-probs...
    assert (e2["lp"] - e2["old"])[m].abs().max() > 0.2  # ...but a moved policy
    assert e1["clip_low"] == 0.2 and e1["clip_high"] == 0.2  # clip_high defaults to clip_low
    assert clip["rows"][0]["clip_frac"] > 0 and free["rows"][0]["clip_frac"] == 0
    assert _changed(tmp_path / "c" / "final", tmp_path / "f" / "final") > 0


def test_fixed_alpha_stays_and_kl_grows_after_the_first_update(trio, tmp_path):
    run_opd(_cfg(trio, tmp_path / "r", kl_mode="fixed", kl_coef=0.7, lr=1e-2))
    rows = _rows(tmp_path / "r")
    assert all(r["kl/alpha"] == 0.7 for r in rows)
    assert rows[0]["kl/k3"] == pytest.approx(0.0, abs=1e-6) and rows[1]["kl/k3"] > 1e-6
    run_opd(_cfg(trio, tmp_path / "n", kl_mode="none", lr=1e-2))
    assert all(r["kl/alpha"] == 0.0 and r["kl/k3"] == 0.0 for r in _rows(tmp_path / "n"))
    assert _changed(tmp_path / "r" / "final", tmp_path / "n" / "final") > 0  # the KL term changed the update


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
    assert r1[0]["kl/k3"] == pytest.approx(0.0, abs=1e-6) and r1[0]["global_step"] == 3
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


def test_keys_the_method_does_not_read_are_errors():
    for kw, key in ((dict(reward_mode="full_vocab"), "reward_mode"), (dict(top_q=0.1), "top_q"),
                    (dict(delta_clip=1.0), "delta_clip"), (dict(teacher_ref="r"), "teacher_ref")):
        with pytest.raises(ShiftkitError, match=f"method=vanilla_opd does not read {key}"):
            OPDConfig(student="s", teacher="t", method="vanilla_opd", **kw).validate()
    with pytest.raises(ShiftkitError, match="does not read the stage key 'reward_mode'"):
        OPDConfig(student="s", method="vanilla_opd", stages=[{"teacher": "t", "reward_mode": "sampled"}]).validate()
    with pytest.raises(ShiftkitError, match="method=grpo does not read teacher, top_k"):
        OPDConfig(student="s", teacher="t", method="grpo", top_k=4).validate()
    OPDConfig(student="s", teacher="t", method="vanilla_opd", top_k=4).validate()  # top_k: the diagnostics read it


def test_grpo_baseline_config_is_derived_field_by_field():
    from shiftkit.opd.loop import grpo_config
    from shiftkit.rl import GRPOConfig

    cfg = OPDConfig(student="s", method="grpo", out="o", tasks=["add"], steps=7, prompts_per_step=3,
                    samples_per_prompt=5, max_new_tokens=9, temperature=0.7, top_p=0.9, lr=1e-3, warmup=2,
                    schedule="cosine", weight_decay=0.1, grad_clip=0.5, aggregation="seq_mean", clip_low=0.1,
                    clip_high=0.2, ppo_epochs=2, kl_mode="fixed", kl_coef=0.3, kl_clamp=False, seed=4, eval_every=3,
                    eval_n=11, save_every=2, threads=1, overwrite=True, progress=False)
    g = grpo_config(cfg)
    want = dict(model="s", out="o", tasks=["add"], steps=7, prompts_per_step=3, group_size=5, max_new_tokens=9,
                temperature=0.7, top_p=0.9, lr=1e-3, warmup=2, schedule="cosine", weight_decay=0.1, grad_clip=0.5,
                aggregation="seq_mean", adv_scale="std", clip_low=0.1, clip_high=0.2, ppo_epochs=2, kl_coef=0.3,
                kl_clamp=False, seed=4, eval_every=3, eval_n=11, save_every=2, threads=1, overwrite=True,
                progress=False)
    assert g == GRPOConfig(**want)
    assert grpo_config(OPDConfig(student="s", method="grpo", kl_coef=0.3)).kl_coef == 0.0  # adaptive: no KL in GRPO


@pytest.mark.parametrize("kw", [dict(reward_mode="student_topk", grpo_weight=0.5, samples_per_prompt=3),
                                dict(reward_mode="sampled", top_q=0.5),
                                dict(reward_mode="full_vocab", clip_low=0.2, ppo_epochs=2),
                                dict(method="vanilla_opd", kl_mode="fixed", kl_coef=0.5)],
                         ids=["topk_outcome", "sampled_topq", "full_vocab_offpolicy", "vanilla"])
def test_micro_batched_opd_equals_one_batch_and_never_builds_full_logits(trio, tmp_path, monkeypatch, kw):
    from shiftkit import sampling
    from shiftkit.tasks import Mixture

    monkeypatch.setattr(Mixture, "reward", lambda self, problem, completion: float(len(completion)))
    one = run_opd(_cfg(trio, tmp_path / "one", steps=2, lr=1e-2, **kw))

    def no_full_logits(*a, **k):
        raise AssertionError("the OPD loop built [B, T, V] logits")

    monkeypatch.setattr(sampling, "forward_logits", no_full_logits)
    mb = run_opd(_cfg(trio, tmp_path / "mb", steps=2, lr=1e-2, token_budget=30, logit_chunk=5, **kw))
    assert all(r["micro_batches"] >= 2 for r in _rows(tmp_path / "mb"))
    w0, w1, w2 = _w(trio["student"]), _w(one["out"]), _w(mb["out"])
    num = sum(((w1[k] - w2[k]) ** 2).sum() for k in w1) ** 0.5
    den = sum(((w1[k] - w0[k]) ** 2).sum() for k in w1) ** 0.5
    assert den > 1e-4 and num / den < 1e-4, float(num / den)
    for a, b in zip(_rows(tmp_path / "one"), _rows(tmp_path / "mb")):
        for k in ("reward/weighted_mean", "delta/mean", "delta/std", "entropy/student", "overlap/teacher_student", "kl/k3"):
            assert a[k] == pytest.approx(b[k], rel=1e-4, abs=1e-6), k
