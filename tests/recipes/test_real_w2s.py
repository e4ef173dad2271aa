"""The real-model weak-to-strong recipe's plumbing, end to end on a tiny Llama that shiftkit builds
(a char tokenizer with a chat template stands in for SmolLM2's), not on SmolLM2 and not at full size."""

import json

import pytest
import torch

from shiftkit.errors import ShiftkitError
from shiftkit.models import TinyModelSpec, load_model_and_tokenizer, make_char_tokenizer, make_tiny_model, save_model
from shiftkit.recipes import real_w2s
from shiftkit.recipes.real_w2s import ARMS, RealW2SConfig

CHAT = ("{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}\n{% endfor %}"
        "{% if add_generation_prompt %}<assistant>{% endif %}")


@pytest.fixture(scope="module")
def tiny_student(tmp_path_factory):
    tok = make_char_tokenizer()
    tok.chat_template = CHAT
    spec = TinyModelSpec(arch="llama", hidden_size=32, num_hidden_layers=3, intermediate_size=64,
                         num_attention_heads=2, num_key_value_heads=1, head_dim=16, max_position_embeddings=1024)
    path = tmp_path_factory.mktemp("real_w2s") / "student"
    save_model(make_tiny_model(spec, vocab_size=len(tok), seed=0), tok, path)
    return str(path)


def _tiny_cfg(student: str, out) -> list[str]:
    return [f"out={out}", f"student={student}", "system_prompt=Be brief.", "train_rows=16", "weak_layers=[0,2]",
            "heal_steps=2", "heal_batch=2", "rl_steps=1", "rl_prompts=2", "rl_group=2", "seeds=[0]", "steps=2",
            "prompts_per_step=2", "samples_per_prompt=2", "lr=1e-3", "max_new_tokens=4", "eval_n=2", "eval_k=2",
            "threads=1", "progress=false"]


def test_recipe_end_to_end_on_tiny_models_and_rerun_is_cached(tiny_student, tmp_path, monkeypatch):
    real_rl = real_w2s.weak_rl

    def perturbed_rl(cfg, weak, data, out, seed):
        # a random tiny model never earns the math reward, so its GRPO makes no update and the teacher would
        # equal the reference (Direct-OPD refuses that); nudge the weights so the pair differs
        path = real_rl(cfg, weak, data, out, seed)
        model, tok = load_model_and_tokenizer(path)
        with torch.no_grad():
            for p in model.parameters():
                p.add_(0.01 * torch.randn_like(p))
        save_model(model, tok, path)
        return path

    monkeypatch.setattr(real_w2s, "weak_rl", perturbed_rl)
    out = tmp_path / "exp"
    summ = real_w2s.run_experiment(None, _tiny_cfg(tiny_student, out))
    res = json.loads((out / "results.json").read_text())
    assert set(res["evals"]) == {"student", "weak", "weak_rl", *ARMS}
    for name, per in res["evals"].items():
        for r in per.values():
            assert {"greedy_acc", "avg@2", "pass@1", "pass@2"} <= set(r) and 0 <= r["avg@2"] <= 1, name
    # the weak base has the kept layers only, with the student's tokenizer
    assert json.loads((out / "weak_pruned" / "config.json").read_text())["num_hidden_layers"] == 2
    # every arm: the same steps, prompts and samples per step
    for a in ARMS:
        rows = [json.loads(x) for x in (out / a / "seed0" / "metrics.jsonl").read_text().splitlines()]
        assert [r["step"] for r in rows if "loss" in r] == [1, 2], a
    assert res["command"].startswith(f"shiftkit experiment real-w2s out={out} ") and "'seeds=[0]'" in res["command"]
    assert res["matched"]["train"]["steps"] == 2 and res["matched"]["eval"]["k"] == 2
    assert {"heal_sft", "weak_rl/seed0", "direct_opd/seed0", "eval/grpo/seed0"} <= set(res["stage_seconds"])
    assert (out / "real_w2s.png").exists() and "| student + Direct-OPD | 1 |" in (out / "report.md").read_text()
    assert summ["student/avg@2"] == res["summary"]["student"]["avg@2"]["mean"]
    # a re-run finds every stage finished and evaluates nothing again (same results)
    monkeypatch.setattr(real_w2s, "weak_rl", lambda *a: pytest.fail("re-run retrained the weak RL teacher"))
    monkeypatch.setattr("shiftkit.evaluate.run_eval", lambda *a, **k: pytest.fail("re-run re-evaluated"))
    again = real_w2s.run_experiment(None, _tiny_cfg(tiny_student, out))
    assert again["student/avg@2"] == summ["student/avg@2"]


@pytest.mark.parametrize("override, msg", [
    ("arms=[direct_opd,ppo]", "unknown arm 'ppo'"),
    ("seeds=[]", "seeds"),
    ("seeds=[1,1]", "seeds"),
    ("weak_layers=[]", "weak_layers"),
    ("samples_per_prompt=1", "GRPO group"),
    ("eval_n=101", "eval_n"),
    ("steps=0", "positive"),
])
def test_config_validation(override, msg):
    with pytest.raises(ShiftkitError, match=msg):
        real_w2s.run_experiment(None, ["out=/nonexistent/never_written", override])


def test_registered_as_an_experiment():
    from shiftkit.cli import EXPERIMENTS, _experiments

    assert "real-w2s" in EXPERIMENTS and _experiments()["real-w2s"] is real_w2s.run_experiment


def test_claims_say_not_resolved_within_one_problem_or_the_seed_spread():
    cfg = RealW2SConfig(eval_n=20, eval_k=4)

    def row(mean, std=0.0):
        return {"avg@4": {"mean": mean, "std": std}}

    summ = {"student": row(0.10), "weak": row(0.02), "weak_rl": row(0.05), "direct_opd": row(0.125),
            "vanilla_opd": row(0.30, 0.01), "grpo": row(0.02, 0.04)}
    text = "\n".join(real_w2s.claims(cfg, summ))
    assert "student is stronger than the weak base (10.0% vs 2.0%): **holds**" in text
    assert "GRPO improves the weak model (5.0% vs 2.0%): **not resolved**" in text  # under one problem in 20
    assert "improves the student (12.5% vs 10.0%): **not resolved**" in text
    assert "beats vanilla OPD from the weak RL teacher (12.5% vs 30.0%): **does not hold**" in text
    assert "beats step-matched GRPO on the student (12.5% vs 2.0%): **holds**" in text
    assert "(12.5% vs 2.0%): **holds**" in text and "not resolved" in text
