"""Mechanics of the SAR demo stage / experiment on pico models (2 GRPO steps per expert, tiny evals)."""

import json

import torch

from shiftkit.recipes.demo import PRESETS, DemoConfig
from shiftkit.models import make_char_tokenizer, make_tiny_model, save_model
from shiftkit.recipes import sar_study as ex

from shiftkit.sar.edit import EditOptions, sar_edit_matrix
from shiftkit.sar.linalg import RankSpec, rel_err
from shiftkit.sar.pipeline import DEFAULT_TARGETS

from .test_pipeline import PICO, _sd, _tuned_from


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
    # the rank-4 sweep model is base + the SAR edit of each target matrix, recomputed here from the
    # base and RL weights; every other tensor is the base's. Rank 4 >= the delta's rank 3 keeps
    # (almost) all of its low-rank energy; rank 1 keeps less
    sweep_dir = tmp_path / "demo" / "sar" / "retention_seed0" / "sweep"
    W0, W1, W4 = _sd(tmp_path / "weak"), _sd(tmp_path / "rl0"), _sd(sweep_dir / "rank-4" / "model")
    Wr1 = _sd(sweep_dir / "rank-1" / "model")
    assert W4.keys() == W0.keys()
    n_target = 0
    for name in W0:
        if W0[name].dim() == 2 and any(t in name for t in DEFAULT_TARGETS):
            e = sar_edit_matrix(W0[name], W1[name], EditOptions(delta_rank=RankSpec("absolute", 4)))
            assert rel_err(W4[name] - W0[name], e.B_mq @ e.A_qn) < 1e-4, name
            if W0[name].shape[0] == W0[name].shape[1]:  # square: identity projection, so the edit is the
                # RL delta up to its 1e-4 noise (about 2% of its norm); rank 1 misses 2 of its 3 directions
                assert rel_err(W4[name] - W0[name], W1[name] - W0[name]) < 0.05, name
                assert rel_err(Wr1[name] - W0[name], W1[name] - W0[name]) > 0.3, name
            n_target += 1
        else:
            assert torch.equal(W4[name], W0[name]), name
    assert n_target == 14  # 7 targets x 2 layers
    table = {r["delta_rank"]: r for r in json.loads((sweep_dir / "sweep.json").read_text())["ranks"]}
    assert table["4"]["mean_energy_lowrank"] > 0.99 > table["1"]["mean_energy_lowrank"]
    assert ret["sar-4"]["energy_total"] == table["4"]["mean_energy_total"]
    # task arithmetic merge = base + sum of the expert deltas (weights 1, 1) on targets, base elsewhere
    experts = [_sd(p) for p in json.loads((tmp_path / "demo" / "sar" / "merge_seed0" / "merged-task_arithmetic" /
                                           "sar_merge.json").read_text())["experts"]]
    ta = _sd(tmp_path / "demo" / "sar" / "merge_seed0" / "merged-task_arithmetic")
    for name in W0:
        if W0[name].dim() == 2 and any(t in name for t in DEFAULT_TARGETS):
            want = W0[name] + sum(x[name] - W0[name] for x in experts)
            torch.testing.assert_close(ta[name], want, rtol=1e-5, atol=1e-6)
        else:
            assert torch.equal(ta[name], W0[name]), name
    # the report's rows carry the measured numbers
    lines = res["report"]
    assert lines[0] == "## 4. SAR: spectral rewiring of RL updates"
    row = next(line for line in lines if line.startswith("| sar-4 |")).split(" | ")
    assert row[3] == f"{100 * ret['sar-4']['greedy_acc']:.1f}" and row[2] == f"{table['4']['mean_energy_total']:.3f}"
    row = next(line for line in lines if line.startswith("| ties |")).split(" | ")
    assert row[-1] == f"{100 * mer['ties']['greedy_acc']:.1f} |"
    assert (tmp_path / "demo" / "sar_retention.png").exists() and (tmp_path / "demo" / "sar_passk.png").exists()
    # second call reuses everything (cached evals, sweep, merges, finished expert runs)
    again = ex.demo_stage(ctx)
    assert again["retention"] == res["retention"] and again["merging"] == res["merging"]
    torch.set_num_threads(1)
