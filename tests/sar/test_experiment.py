"""Mechanics of the SAR demo stage / experiment on pico models (2 GRPO steps per expert, tiny evals)."""

import json

import torch

from shiftkit.recipes.demo import PRESETS, DemoConfig
from shiftkit.models import make_char_tokenizer, make_tiny_model, save_model
from shiftkit.recipes import sar_study as ex

from .test_pipeline import PICO, _tuned_from


def test_demo_stage_quick_on_pico(tmp_path):
    tok = make_char_tokenizer()
    base = make_tiny_model(PICO, seed=0)
    save_model(base, tok, tmp_path / "weak")
    save_model(_tuned_from(base, 1), tok, tmp_path / "rl0")  # stands in for the weak model's GRPO run
    cfg = DemoConfig(**{**PRESETS["quick"], "eval_n": 3, "eval_samples": 2, "threads": 1, "progress": False,
                        "rl_prompts": 2, "rl_group": 2})
    ctx = {"cfg": cfg, "out": tmp_path / "demo", "weak": str(tmp_path / "weak"), "weak_rl": {0: str(tmp_path / "rl0")},
           "preset": "quick"}
    (tmp_path / "demo").mkdir()
    res = ex.demo_stage(ctx)
    ret, mer = res["retention"][0], res["merging"][0]
    ranks = ex.DEMO["quick"]["delta_ranks"]
    assert list(ret) == ["base", "rl"] + [f"sar-{r}" for r in ranks]
    fr = [ret[f"sar-{r}"]["param_fraction"] for r in ranks]
    assert 0 < fr[0] < fr[1] < 1  # larger delta rank, larger core
    assert all("pass@2" in row and 0 <= row["greedy_acc"] <= 1 for row in ret.values())
    assert set(mer) == {"base", "expert-add", "expert-mul", "sar", "task_arithmetic", "ties", "dare_ties"}
    assert all({"greedy_acc/add", "greedy_acc/mul"} <= set(row) for row in mer.values())
    # the merged checkpoints exist and record their method
    for m in ("sar", "ties"):
        assert json.loads((tmp_path / "demo" / "sar" / "merge_seed0" / f"merged-{m}" / "sar_merge.json").read_text())[
            "method"] == m
    # SAR edit at rank 4 on a rank-3 "RL" delta keeps (almost) all of it: the edited model != base
    sw = tmp_path / "demo" / "sar" / "retention_seed0" / "sweep" / "rank-4" / "model"
    assert sw.exists()
    lines = res["report"]
    assert lines[0] == "## 4. SAR: spectral rewiring of RL updates"
    assert any(line.startswith("| sar-4 |") for line in lines) and any(line.startswith("| ties |") for line in lines)
    assert (tmp_path / "demo" / "sar_retention.png").exists() and (tmp_path / "demo" / "sar_passk.png").exists()
    # second call reuses everything (cached evals, sweep, merges, finished expert runs)
    again = ex.demo_stage(ctx)
    assert again["retention"] == res["retention"] and again["merging"] == res["merging"]
    torch.set_num_threads(1)
