"""The real-model experiment's plumbing, end to end on a tiny Llama that shiftkit builds (a char
tokenizer with a chat template stands in for SmolLM2's), not on SmolLM2 and not at full size; and its
pure parts (the task splits, the format check, the verdict rule) with hand-made values."""

import json
from pathlib import Path

import pytest
import torch

from shiftkit.errors import ShiftkitError
from shiftkit.models import TinyModelSpec, load_model_and_tokenizer, make_char_tokenizer, make_tiny_model, save_model
from shiftkit.recipes import real_w2s
from shiftkit.recipes.real_w2s import ARMS, EXPERTS, MERGES, SAR_ARMS, RealW2SConfig

CHAT = ("{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}\n{% endfor %}"
        "{% if add_generation_prompt %}<assistant>{% endif %}")


@pytest.fixture(scope="module")
def tiny_student(tmp_path_factory):
    tok = make_char_tokenizer()
    tok.chat_template = CHAT
    spec = TinyModelSpec(arch="llama", hidden_size=32, num_hidden_layers=4, intermediate_size=64,
                         num_attention_heads=2, num_key_value_heads=1, head_dim=16, max_position_embeddings=1024)
    path = tmp_path_factory.mktemp("real_w2s") / "student"
    save_model(make_tiny_model(spec, vocab_size=len(tok), seed=0), tok, path)
    return str(path)


def _tiny_cfg(student: str, out) -> list[str]:
    return [f"out={out}", f"student={student}", "template={prompt} Be brief.", "train_per_task=8", "eval_n=4",
            "weak_layers=[0,2]", "heal_rows=4", "heal_max_new_tokens=8", "heal_steps=2", "heal_batch=2", "format_tol=1.0", "length_tol=10",
            "rl_steps=1", "rl_prompts=2", "rl_group=2", "seeds=[0]", "steps=2", "prompts_per_step=2",
            "samples_per_prompt=2", "lr=1e-3", "max_new_tokens=4", "expert_steps=1", "control_drop=[3]", "eval_k=2",
            "threads=1", "progress=false"]


def _nudge(path: str) -> str:
    """A random nudge to a trained model: a random tiny model never earns the math reward, so its GRPO
    makes no update (a teacher equal to its reference, a zero delta to edit or merge)."""
    model, tok = load_model_and_tokenizer(path)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.1 * p.std() * torch.randn_like(p))
    save_model(model, tok, path)
    return path


def test_recipe_end_to_end_on_tiny_models_and_rerun_is_cached(tiny_student, tmp_path, monkeypatch):
    import shiftkit.opd.loop as loop

    real_rl, real_opd = real_w2s.grpo_run, loop.run_opd
    monkeypatch.setattr(real_w2s, "grpo_run", lambda *a: _nudge(real_rl(*a)))

    def opd(c):
        s = real_opd(c)
        return {**s, "out": _nudge(s["out"])} if c.method == "grpo" else s

    monkeypatch.setattr(loop, "run_opd", opd)
    out = tmp_path / "exp"
    summ = real_w2s.run_experiment(None, _tiny_cfg(tiny_student, out))
    res = json.loads((out / "results.json").read_text())
    assert set(res["evals"]) == {"student", "weak", "weak_rl", *ARMS, *SAR_ARMS, *EXPERTS, *MERGES}
    for name, per in res["evals"].items():
        for r in per.values():
            assert {"greedy_acc", "avg@2", "pass@1", "pass@2", "avg@2/add", "avg@2/larger"} <= set(r), name
            assert 0 <= r["avg@2"] <= 1 and r["avg@2"] == pytest.approx((r["avg@2/add"] + r["avg@2/larger"]) / 2)
    assert res["config"]["eval_n"] == 4 and res["matched"]["eval"]["problems"] == 4
    # the weak base has the kept layers only; it was healed on the student's own samples, and its format checked
    assert json.loads((out / "weak_pruned" / "config.json").read_text())["num_hidden_layers"] == 2
    heal = [json.loads(x) for x in (out / "data" / "heal.jsonl").read_text().splitlines()]
    train = [json.loads(x) for x in (out / "data" / "train.jsonl").read_text().splitlines()]
    assert [h["question"] for h in heal] == [t["question"] for t in train[:4]]
    assert set(res["format"]["student"]) == {"eos_rate/greedy", "eos_rate/sampled", "length/greedy", "length/sampled"}
    # every arm and expert: the same prompts and samples per step (experts: expert_steps)
    for a in ARMS:
        rows = [json.loads(x) for x in (out / a / "seed0" / "metrics.jsonl").read_text().splitlines()]
        assert [r["step"] for r in rows if "loss" in r] == [1, 2], a
    # the anatomy of the weak pair and of the contrast pair, both Direct-OPD modes, shares summing to 1
    for an in (res["anatomy"]["0"], res["anatomy_control"]["anatomy"]):
        assert sum(an[f"{c}_share"] for c in ("eos", "format", "content")) == pytest.approx(1.0)
    assert json.loads((out / "control_pruned" / "config.json").read_text())["num_hidden_layers"] == 3
    # SAR at two ranks of the GRPO delta, merges of the two experts
    assert [v["delta_rank"] for v in res["sar"]["0"].values()] == ["0.01", "1"]
    from shiftkit.sar.pipeline import CORE_META

    for name, core in (("sar_default", "rank-0.01"), ("sar_small", "rank-1")):  # cores of the student's GRPO delta
        meta = json.loads((out / "sar" / "seed0" / core / CORE_META).read_text())
        assert meta["tuned"]["path"] == str((out / "grpo" / "seed0" / "final").resolve())
        assert meta["base"]["path"] == str(Path(tiny_student).resolve())
        assert res["models"][name]["0"] == str(out / "sar" / "seed0" / core / "model")
    assert all((out / "merge" / "seed0" / m.removeprefix("merge_") / "sar_merge.json").exists() for m in MERGES)
    claims = {c["claim"]: c for c in res["verdicts"]}
    assert claims["Direct-OPD improves the student"]["verdict"] == "not resolved (one seed)"
    assert res["command"].startswith(f"shiftkit experiment real-w2s out={out} ") and "'seeds=[0]'" in res["command"]
    assert res["wall_seconds"] > 0 and {"heal_sft", "weak_rl/seed0", "direct_opd/seed0", "eval/grpo/seed0"} <= set(
        res["stage_seconds"])
    report = (out / "report.md").read_text()
    assert (out / "real_w2s.png").exists() and "| student + Direct-OPD (student_topk) | 1 |" in report
    assert summ["student/avg@2"] == res["summary"]["student"]["avg@2"]["mean"]
    # a re-run finds every stage finished and evaluates nothing again (same results)
    monkeypatch.setattr(real_w2s, "grpo_run", lambda *a: pytest.fail("re-run retrained a GRPO teacher"))
    monkeypatch.setattr(loop, "run_opd", lambda *a: pytest.fail("re-run retrained an arm"))
    monkeypatch.setattr("shiftkit.evaluate.run_eval", lambda *a, **k: pytest.fail("re-run re-evaluated"))
    again = real_w2s.run_experiment(None, _tiny_cfg(tiny_student, out))
    assert again["student/avg@2"] == summ["student/avg@2"]
    # ... also with the seed and the contrast pair in worker processes (every stage there is cached too)
    mtimes = {p: p.stat().st_mtime for p in out.rglob("*") if p.is_file() and p.parent.name != "exp"}
    par = real_w2s.run_experiment(None, _tiny_cfg(tiny_student, out) + ["workers=2"])
    assert par["direct_opd/avg@2"] == summ["direct_opd/avg@2"]
    assert {p: p.stat().st_mtime for p in mtimes} == mtimes  # nothing under out/ rewritten but its top-level files
    assert json.loads((out / "results.json").read_text())["invocations"][-1]["workers"] == 2


@pytest.mark.parametrize("override, msg", [
    ("arms=[direct_opd,ppo]", "unknown arm 'ppo'"),
    ("seeds=[]", "seeds"),
    ("seeds=[1,1]", "seeds"),
    ("weak_layers=[]", "weak_layers"),
    ("samples_per_prompt=1", "GRPO group"),
    ("eval_n=201", "eval_n"),
    ("steps=0", "positive"),
    ("sar_ranks=[0.01]", "sar_ranks"),
    ("heal_rows=5000", "heal_rows"),
    ("autocast=float16", "autocast"),
])
def test_config_validation(override, msg, tmp_path):
    with pytest.raises(ShiftkitError, match=msg):
        real_w2s.run_experiment(None, [f"out={tmp_path / 'never'}", override])
    assert not (tmp_path / "never").exists()


def test_registered_as_an_experiment():
    from shiftkit.cli import EXPERIMENTS, _experiments

    assert "real-w2s" in EXPERIMENTS and _experiments()["real-w2s"] is real_w2s.run_experiment


def test_splits_are_disjoint_balanced_and_answered():
    train, test = real_w2s.make_splits(300, 200)
    assert len(train) == 600 and len(test) == 200
    assert [r["domain"] for r in test].count("add") == 100 and [r["domain"] for r in test].count("larger") == 100
    assert not {r["question"] for r in train} & {r["question"] for r in test}
    for r in train + test:
        a, b = [int(x) for x in r["question"].replace("?", "").replace(",", "").split() if x.isdigit()]
        assert 10 <= a <= 99 and 10 <= b <= 99
        assert r["answer"] == str(a + b if r["domain"] == "add" else max(a, b))
        assert r["domain"] == "add" or a != b
    assert real_w2s.make_splits(300, 200) == (train, test)  # the same problems on every call


def _ev(trunc_greedy, trunc, len_greedy, length):
    return {"greedy_truncation_rate": trunc_greedy, "truncation_rate": trunc,
            "greedy_response_length/mean": len_greedy, "response_length/mean": length}


def test_format_check_names_the_statistic_that_differs():
    cfg = RealW2SConfig(format_tol=0.1, length_tol=0.3)
    ok = real_w2s.format_check(cfg, _ev(0.1, 0.25, 14, 19), _ev(0.15, 0.3, 16, 22))
    assert ok["mismatch"] == [] and ok["weak"]["eos_rate/sampled"] == pytest.approx(0.7)
    with pytest.raises(ShiftkitError, match=r"eos_rate/sampled 0\.10 vs the student's 0\.75"):
        real_w2s.format_check(cfg, _ev(0.1, 0.25, 14, 19), _ev(0.1, 0.9, 14, 19))  # a weak model that never ends
    with pytest.raises(ShiftkitError, match=r"length/greedy 30\.00 vs the student's 14\.00"):
        real_w2s.format_check(cfg, _ev(0.1, 0.25, 14, 19), _ev(0.1, 0.25, 30, 19))


def test_verdict_rule_needs_seeds_and_a_gap_beyond_one_problem_and_twice_the_spread():
    v = real_w2s.verdict
    assert v([0.5], [0.1], 200)[0] == "not resolved (one seed)"  # one seed is never "holds"
    assert v([0.30, 0.32, 0.31], [0.20, 0.21, 0.19], 200)[0] == "holds"
    assert v([0.20, 0.21, 0.19], [0.30, 0.32, 0.31], 200)[0] == "does not hold"
    assert v([0.30, 0.10, 0.20], [0.15, 0.16, 0.14], 200)[0] == "not resolved"  # within twice the seed std
    assert v([0.304, 0.305, 0.306], [0.30], 100)[0] == "not resolved"  # within one problem in 100
    assert v([0.305, 0.305], [0.30], 1000) == ("holds", pytest.approx(0.001))
    # two single models (no seeds) use twice the standard error of their difference
    assert v([0.40], [0.20], 200, se=(0.03, 0.04)) == ("holds", pytest.approx(0.1))
    assert v([0.40], [0.35], 200, se=(0.03, 0.04))[0] == "not resolved"


def _row(**m):
    return {"avg@4": m.get("avg", 0.0), "avg@4_se": 0.02, "pass@4": m.get("pk", 0.0)}


def test_claims_sar_retention_and_high_k_and_the_best_expert():
    cfg = RealW2SConfig(eval_n=200, eval_k=4)
    ev = {"student": {0: _row(avg=0.20, pk=0.60)}, "weak": {0: _row(avg=0.05, pk=0.2)},
          "grpo": {0: _row(avg=0.50, pk=0.55), 1: _row(avg=0.501, pk=0.70), 2: _row(avg=0.502, pk=0.71)},
          "sar_default": {0: _row(avg=0.51, pk=0.60), 1: _row(avg=0.511, pk=0.70), 2: _row(avg=0.512, pk=0.72)},
          "sar_small": {0: _row(avg=0.30, pk=0.6), 1: _row(avg=0.31, pk=0.6), 2: _row(avg=0.32, pk=0.6)},
          "expert_add": {s: _row(avg=0.30 + 0.01 * s) for s in range(3)},
          "expert_larger": {s: _row(avg=0.40 - 0.01 * s) for s in range(3)},
          "merge_sar": {s: _row(avg=0.45) for s in range(3)}, "merge_ties": {s: _row(avg=0.45) for s in range(3)}}
    cl = {c["claim"]: c for c in real_w2s.claims(cfg, ev)}
    assert cl["the student is stronger than the weak base"]["verdict"] == "holds"  # 15 points > 2 x 2.8 SE
    assert cl["GRPO improves the student"]["verdict"] == "holds"
    keep = cl["SAR (default rank) keeps >99% of the student's GRPO gain"]
    assert keep["verdict"] == "holds" and keep["retention"] == pytest.approx([31 / 30, 31.1 / 30.1, 31.2 / 30.2])
    assert cl["SAR (smaller rank) keeps >99% of the student's GRPO gain"]["verdict"] == "does not hold"
    ev["grpo"][1] = _row(avg=0.52, pk=0.70)  # a seed spread of 1 point: a 1% bound on the loss is out of reach
    cl2 = {c["claim"]: c for c in real_w2s.claims(cfg, ev)}
    assert cl2["SAR (default rank) keeps >99% of the student's GRPO gain"]["verdict"] == "not resolved"
    hk = cl["SAR (default rank) raises pass@4 over the GRPO model"]
    assert hk["verdict"] == "not resolved" and list(hk["seeds_where_grpo_pass@k_fell"]) == [0]
    assert hk["seeds_where_grpo_pass@k_fell"][0] == {"student": 0.60, "grpo": 0.55, "sar_default": 0.60}
    best = cl["SAR merging beats the best single expert"]
    assert best["mean_b"] == pytest.approx(0.39) and best["verdict"] == "holds"  # per seed max(0.30+s, 0.40-s)
    assert cl["SAR merging beats TIES"]["verdict"] == "not resolved"
    assert "SAR merging beats task arithmetic" not in cl  # an arm that did not run has no verdict


def test_plot_takes_the_pass_at_k_that_the_evaluation_reports(tmp_path):
    """run_eval reports pass@1, 2, 4, ... and pass@K, so with eval_k=4 there is no pass@3: the plot (drawn
    at the very end of a multi-hour run, before results.json is written) must not ask for it."""
    from shiftkit.metrics import default_ks

    assert default_ks(4) == [1, 2, 4]
    row = {m: {"mean": 0.5, "std": 0.0} for m in ("greedy_acc", "avg@4", *(f"pass@{j}" for j in default_ks(4)))}
    real_w2s.plot(RealW2SConfig(eval_k=4), {"student": row, "grpo": row}, tmp_path / "p.png")
    assert (tmp_path / "p.png").stat().st_size > 0


def test_a_finished_training_stage_is_reused_only_with_its_settings(tmp_path, capsys):
    """A cached training stage (its run dir DONE) is reused only under the settings it was trained with: a changed
    setting (heal_steps) is an error naming the stage, never the old model in silence; how and where a run goes
    (out, threads, workers, seeds) is not part of the key."""
    from shiftkit.errors import ShiftkitError

    d = tmp_path / "weak_sft"
    calls = []

    def train():
        calls.append(1)
        (d / "final").mkdir(parents=True)
        (d / "DONE").write_text("ok\n")
        return str(d / "final")

    a = real_w2s.stage_key(real_w2s.RealW2SConfig(out="x"))
    assert a == real_w2s.stage_key(real_w2s.RealW2SConfig(out="y", workers=2, seeds=[0, 1], threads=2))
    b = real_w2s.stage_key(real_w2s.RealW2SConfig(out="x", heal_steps=96))
    assert a != b
    real_w2s.Stages(tmp_path, key=a).run("heal_sft", train, d)
    assert (d / "STAGE_KEY").read_text().strip() == a
    assert real_w2s.Stages(tmp_path, key=a).run("heal_sft", train, d) == str(d / "final") and calls == [1]
    with pytest.raises(ShiftkitError, match=r"stage heal_sft in .*weak_sft was trained with other settings"):
        real_w2s.Stages(tmp_path, key=b).run("heal_sft", train, d)
    (d / "STAGE_KEY").unlink()  # a run made before keys were kept: reused, and said
    assert real_w2s.Stages(tmp_path, key=b).run("heal_sft", train, d) == str(d / "final") and calls == [1]
    assert "no stage key" in capsys.readouterr().err
