"""samples.jsonl's per-token ``delta`` is the sampled token's Delta (issue 22): checked against an
independent score of the teacher and the reference at the sampled tokens, with the candidates' mean
as its own field; and ``determinism_gap`` is saved in summary.json."""

import json

import pytest

from shiftkit import microbatch
from shiftkit.dist import Dist
from shiftkit.loopkit import rollout
from shiftkit.models import load_model_and_tokenizer
from shiftkit.opd.loop import OPDConfig, delta_summary, opd_signal, run_opd
from shiftkit.sampling import score

ONE = Dist()  # one process (the real launcher-free Dist: shard, is_main, barrier, gathered)


def _models(trio):
    (s, tok), (t, _), (r, _) = (load_model_and_tokenizer(trio[k]) for k in ("student", "teacher", "ref"))
    return s, t, r, tok


@pytest.mark.parametrize("mode, budget", [("student_topk", 0), ("full_vocab", 0), ("student_topk", 40)])
def test_delta_is_the_sampled_tokens_delta(trio, mode, budget):
    student, teacher, ref, tok = _models(trio)
    cfg = OPDConfig(student="s", teacher="t", teacher_ref="r", reward_mode=mode, top_k=4, reward_scale=0.5)
    _, roll = rollout(student, tok, ["Q:1+2=", "Q:3+4="], 4, 0, 0, ONE, max_new_tokens=8, temperature=1.0)
    args = (roll.prompt_ids_BP, roll.prompt_mask_BP, roll.completion_ids_BT, roll.completion_mask_BT)
    mbs = microbatch.micro_batches(roll.prompt_mask_BP, roll.completion_mask_BT, budget)
    n = 5  # crosses the first micro-batch when budget=40
    sig = opd_signal(cfg, student, teacher, ref, roll, mbs, dtype=None, chunk=None, keep_old=False, sampled_rows=n)
    want_BT = 0.5 * (score(teacher, *args) - score(ref, *args))  # reward_scale shapes Delta
    m = roll.completion_mask_BT.bool()
    rows = delta_summary(sig, roll.completion_mask_BT, n)
    for b in range(n):
        assert rows["delta"][b] == pytest.approx(want_BT[b][m[b]].tolist(), abs=2e-4)
        assert rows["delta_candidates"][b] == pytest.approx(sig.delta_mean_BT[b][m[b]].tolist(), abs=1e-4)
        assert rows["delta/mean"][b] == pytest.approx(float(want_BT[b][m[b]].mean()), abs=1e-5)
    # the candidates' mean at the first position is a function of the prompt alone; the sampled Delta is not
    first = [rows["delta"][b][0] for b in range(4)]
    assert len({rows["delta_candidates"][b][0] for b in range(4)}) == 1
    ids0 = roll.completion_ids_BT[:4, 0].tolist()
    assert len(set(ids0)) > 1 and len(set(first)) > 1
    assert all(rows["delta"][b][0] != rows["delta_candidates"][b][0] for b in range(4))
    assert sig.delta_sampled_BT[n:].abs().sum() == 0  # rows after the first n are not scored


def test_with_the_sampled_token_as_the_only_candidate_delta_is_the_signal(trio):
    student, teacher, ref, tok = _models(trio)
    cfg = OPDConfig(student="s", teacher="t", teacher_ref="r", reward_mode="sampled")
    _, roll = rollout(student, tok, ["Q:1+2="], 2, 0, 0, ONE, max_new_tokens=6, temperature=1.0)
    mbs = microbatch.micro_batches(roll.prompt_mask_BP, roll.completion_mask_BT)
    sig = opd_signal(cfg, student, teacher, ref, roll, mbs, dtype=None, chunk=None, keep_old=False, sampled_rows=2)
    args = (roll.prompt_ids_BP, roll.prompt_mask_BP, roll.completion_ids_BT, roll.completion_mask_BT)
    rows = delta_summary(sig, roll.completion_mask_BT, 2)
    m = roll.completion_mask_BT.bool()
    want = score(teacher, *args) - score(ref, *args)
    assert "delta_candidates" not in rows
    assert rows["delta"][0] == pytest.approx(want[0][m[0]].tolist(), abs=2e-4)


def test_samples_file_and_summary_json_of_a_run(trio, tmp_path):
    out = tmp_path / "r"
    s = run_opd(OPDConfig(student=trio["student"], teacher=trio["teacher"], teacher_ref=trio["ref"], out=str(out),
                          tasks=["add:1"], steps=2, prompts_per_step=2, samples_per_prompt=3, max_new_tokens=6,
                          lr=1e-3, eval_every=0, progress=False, threads=1, guard_patience=0, samples_every=1,
                          samples_n=3))
    rows = [json.loads(x) for x in (out / "samples.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 1, 1, 2, 2, 2]
    assert all(len(r["delta"]) == len(r["delta_candidates"]) >= 1 for r in rows)
    assert any(r["delta"] != r["delta_candidates"] for r in rows)
    saved = json.loads((out / "summary.json").read_text())
    assert saved["determinism_gap"] == s["determinism_gap"] and 0 <= saved["determinism_gap"] < 1e-4
