"""The ``shiftkit kernels`` command group, eval-set pools (local, Ray) and import-kernelbench."""

import json

import pytest

from shiftkit.cli import main
from shiftkit.kernels.fixtures import PROBLEMS, ROOT, SOLUTIONS

pytestmark = pytest.mark.usefixtures("torch_binding_build")  # the slow torch-binding build, once per session


def test_kernels_eval_json(capsys):
    rc = main(["kernels", "eval", "--problem", str(PROBLEMS / "rowsum_scale.py"), "--solution",
               str(SOLUTIONS / "rowsum_scale" / "correct.py"), "profile=false", "--json"])
    assert rc == 0
    d = json.loads(capsys.readouterr().out)
    assert d["correct"] and d["compiled"] and d["reward"] == 1.0 and d["findings"] == [] and d["compile_errors"] == []


def test_kernels_eval_prints_result(capsys):
    rc = main(["kernels", "eval", "--problem", str(PROBLEMS / "rowsum_scale.py"), "--solution",
               str(SOLUTIONS / "rowsum_scale" / "correct.py"), "profile=false", "trials=2"])
    out = capsys.readouterr().out
    assert rc == 0 and "correct:  True" in out and "reward:   +1" in out


def test_kernels_eval_unknown_key_is_user_error(capsys):
    rc = main(["kernels", "eval", "--problem", str(PROBLEMS / "rowsum_scale.py"), "--solution",
               str(SOLUTIONS / "rowsum_scale" / "correct.py"), "trails=2"])
    assert rc == 2 and "did you mean 'trials'" in capsys.readouterr().err


def test_kernels_eval_set_pool(tmp_path, capsys):
    probs, sols = tmp_path / "p", tmp_path / "s"
    probs.mkdir()
    (sols / "kb_l1_47_Sum_reduction_over_a_dimension").mkdir(parents=True)
    for name in ("rowsum_scale", "kb_l1_47_Sum_reduction_over_a_dimension"):
        (probs / f"{name}.py").write_text((PROBLEMS / f"{name}.py").read_text())
    (sols / "rowsum_scale.py").write_text((SOLUTIONS / "rowsum_scale" / "correct.py").read_text())
    for s in ("correct.py", "wrong_axis.py"):
        (sols / "kb_l1_47_Sum_reduction_over_a_dimension" / s).write_text(
            (SOLUTIONS / "kb_l1_47_Sum_reduction_over_a_dimension" / s).read_text())
    out = tmp_path / "res.jsonl"
    rc = main(["kernels", "eval-set", "--problems", str(probs), "--solutions", str(sols), "--workers", "2",
               "--out", str(out), "--no-progress", "profile=false", "trials=2", "--json"])
    assert rc == 0
    summary = json.loads(capsys.readouterr().out)
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(rows) == 3 and summary["n"] == 3
    by = {(r["problem"], r["solution"].rsplit("/", 1)[-1]): r for r in rows}
    assert by[("rowsum_scale", "rowsum_scale.py")]["correct"]
    assert by[("kb_l1_47_Sum_reduction_over_a_dimension", "correct.py")]["correct"]
    assert not by[("kb_l1_47_Sum_reduction_over_a_dimension", "wrong_axis.py")]["correct"]
    assert summary["metrics"]["pass_rate"] == pytest.approx(2 / 3)
    assert "pass_rate=0.667" in out.with_suffix(".summary.txt").read_text()


def test_kernels_eval_set_ray(tmp_path):
    pytest.importorskip("ray")
    from shiftkit.kernels.evalset import run_pool
    from shiftkit.kernels.evaluate import EvalConfig

    pairs = [(str(PROBLEMS / "rowsum_scale.py"), str(SOLUTIONS / "rowsum_scale" / "correct.py"))]
    rows = run_pool(pairs, EvalConfig(profile=False, trials=2), 1, tmp_path / "r.jsonl", use_ray=True, progress=False)
    assert len(rows) == 1 and rows[0]["correct"]


def test_import_kernelbench_scale_cpu(tmp_path, capsys):
    rc = main(["kernels", "import-kernelbench", str(ROOT / "kernelbench"), "--level", "1", "--scale", "cpu",
               "--only", "19,23", "--out", str(tmp_path), "--json"])
    assert rc == 0
    d = json.loads(capsys.readouterr().out)
    assert d["imported"] == 1 and d["skipped"] == 1  # 23_Softmax over >10k columns: degenerate at 1e-4
    rec = {r["source"].rsplit("/", 1)[-1]: r for r in d["records"]}
    assert rec["23_Softmax.py"]["reason"].startswith("reference output is") and rec["23_Softmax.py"]["out"] is None
    relu = rec["19_ReLU.py"]
    assert relu["original_sizes"] == {"batch_size": 4096, "dim": 393216}
    assert 1.0 <= relu["ref_ms"] <= 100.0
    text = (tmp_path / "kb_l1_19_ReLU.py").read_text()
    assert "ORIGINAL_SIZES = {'batch_size': 4096, 'dim': 393216}" in text and "KernelBench level1/19_ReLU.py" in text


def test_import_kernelbench_missing_dir_is_user_error(tmp_path, capsys):
    rc = main(["kernels", "import-kernelbench", str(tmp_path), "--level", "1"])
    assert rc == 2 and "no KernelBench level-1" in capsys.readouterr().err


def test_kernels_eval_bad_reward_is_user_error(capsys):
    rc = main(["kernels", "eval", "--problem", str(PROBLEMS / "rowsum_scale.py"), "--solution",
               str(SOLUTIONS / "rowsum_scale" / "correct.py"), "reward=fastest"])
    assert rc == 2 and "valid: milestone, log_speedup" in capsys.readouterr().err


def test_every_kernels_input_is_a_config_field(tmp_path, capsys):
    """Flags are aliases: the same eval from key=value fields and from a --config file; --help lists the keys."""
    prob, sol = str(PROBLEMS / "rowsum_scale.py"), str(SOLUTIONS / "rowsum_scale" / "correct.py")
    assert main(["kernels", "eval", f"problem={prob}", f"solution={sol}", "profile=false", "--json"]) == 0
    by_fields = json.loads(capsys.readouterr().out)
    cfg = tmp_path / "job.yaml"
    cfg.write_text(f"problem: {prob}\nsolution: {sol}\nprofile: false\n")
    assert main(["kernels", "eval", "--config", str(cfg), "--json"]) == 0
    by_file = json.loads(capsys.readouterr().out)
    assert by_fields["correct"] and by_fields["reward"] == by_file["reward"] == 1.0
    assert main(["kernels", "eval", "profile=false"]) == 2
    assert "needs problem=FILE and solution=FILE" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["kernels", "eval-set", "--help"])
    help_text = capsys.readouterr().out
    assert "workers" in help_text and "ray_address" in help_text and "trials" in help_text


def test_import_kernelbench_source_as_a_field(tmp_path, capsys):
    rc = main(["kernels", "import-kernelbench", f"source={ROOT / 'kernelbench'}", "level=1", "scale=cpu",
               "only=[19]", f"out={tmp_path}", "--json"])
    assert rc == 0 and json.loads(capsys.readouterr().out)["imported"] == 1
    assert main(["kernels", "import-kernelbench", "level=1"]) == 2
    assert "needs source=DIR" in capsys.readouterr().err
