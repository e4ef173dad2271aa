"""The demo's OPD stage (quick preset) end to end on tiny random models: all five methods, report."""

from shiftkit.recipes.demo import DemoConfig, PRESETS
from shiftkit.recipes.weak_to_strong import METHODS, demo_stage


def test_demo_stage_quick_runs_every_method_and_writes_report(trio, tmp_path):
    cfg = DemoConfig(**{**PRESETS["quick"], "eval_n": 4, "threads": 1, "progress": False})
    ctx = {"cfg": cfg, "out": tmp_path, "preset": "quick", "weak": trio["ref"], "strong": trio["student"],
           "weak_rl": {0: trio["teacher"]}}
    res = demo_stage(ctx)
    assert set(res["methods"]) == set(METHODS)
    text = "\n".join(res["report"])
    assert text.startswith("## 3. Weak-to-strong transfer (Direct-OPD)")
    for label in ("Direct-OPD (student_topk)", "vanilla OPD", "GRPO on student", "2-stage", "± "):
        assert label in text
    assert (tmp_path / "opd_accuracy.png").exists()
    for m in METHODS[:4]:
        r = res["methods"][m][0]
        assert 0 <= r["greedy_acc"] <= 1 and r["train_seconds"] > 0
    # random-init weak model: its 2-step add-only GRPO gets reward 0, never updates, so there is no shift
    # to compose; the preflight catches teacher == reference and the report says so instead of crashing
    assert "GRPO made no update" in res["methods"]["composition"][0]["skipped"]
    assert "| Direct-OPD 2-stage (add-RL then mul-RL shift) | skipped" in text
