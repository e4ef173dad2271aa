"""The kernel reward (TRL signature): answer extraction, the reward's mapping of verdicts, the dataset
builder, and one real evaluation of each answer format."""

import json
from pathlib import Path

import pytest

from shiftkit.errors import ShiftkitError
from shiftkit.kernels.envclient import KernelEnv, LocalKernelEnv
from shiftkit.kernels.reward_fn import (build_dataset, extract_solution, load_problem_rows, make_kernel_reward,
                                        render_prompt)
from shiftkit.rewards import needed_columns

REPO = Path(__file__).resolve().parents[2]
FIX = REPO / "shiftkit/kernels/fixtures"
PROBLEM = (FIX / "problems/scale_shift_clamp.py").read_text()
CORRECT = (FIX / "solutions/scale_shift_clamp/correct.py").read_text()


def fenced(body, info="python"):
    return f"```{info}\n{body}\n```\n"


def test_extract_one_fenced_file_takes_the_last_modelnew_block():
    draft = "class ModelNew:\n    pass  # draft"
    text = "Plan first.\n" + fenced("x = 1") + fenced(draft) + "Better:\n" + fenced(CORRECT.strip()) + "done"
    sol, why = extract_solution(text)
    assert sol == CORRECT.strip() + "\n" and why == "one fenced file"
    assert extract_solution(fenced(CORRECT, "py"))[0] == CORRECT + "\n"


def test_extract_a_workspace_by_named_fences():
    text = (fenced("from kernel_ext import f\nclass ModelNew: pass", "python model_new.py")
            + fenced('extern "C" void f() {}', "cpp kernels/f.cpp") + fenced("int g();", "kernels/f.h"))
    sol, why = extract_solution(text)
    assert set(sol) == {"model_new.py", "kernels/f.cpp", "kernels/f.h"} and "workspace" in why
    assert sol["kernels/f.cpp"] == 'extern "C" void f() {}\n'


@pytest.mark.parametrize("text,word", [
    ("no code at all", "no fenced"),
    (fenced("x = 1"), "no fenced"),  # a python block without ModelNew
    (fenced("int f();", "cpp kernels/a.cpp"), "without model_new.py"),
    (fenced("class ModelNew: pass", "python model_new.py") + fenced("x", "cpp ../evil.cpp"), "not allowed"),
    (fenced("class ModelNew: pass", "python model_new.py") + fenced("x", "cpp /etc/a.cpp"), "not allowed"),
    (fenced("class ModelNew: pass", "python model_new.py") + fenced("x", "cpp src/deep/a.cpp"), "not allowed"),
])
def test_extract_rejects(text, word):
    sol, why = extract_solution(text)
    assert sol is None and word in why


class FakeEnv(KernelEnv):
    """Answers from a table keyed by the solution text; records the requests."""

    def __init__(self, table):
        self.table, self.seen = table, []

    def evaluate(self, problem, solution, mode="verify", config=None, problem_name="problem"):
        self.seen.append((problem_name, mode, solution))
        return self.table[solution if isinstance(solution, str) else solution["model_new.py"]]


def call(fn, completions, problems, names=None):
    logged, metrics = {}, {}
    out = fn(prompts=["p"] * len(completions), completions=completions, problem=problems, problem_name=names,
             log_extra=lambda k, v: logged.__setitem__(k, v),
             log_metric=lambda k, v: metrics.__setitem__(k, v))
    return out, logged["kernel"], metrics


def test_reward_maps_verdicts_and_logs_findings():
    good = "class ModelNew:\n    good = 1"
    slow = "class ModelNew:\n    slow = 1"
    busy = "class ModelNew:\n    busy = 1"
    env = FakeEnv({good + "\n": {"reward": 3.0, "correct": True, "compiled": True, "reason": "fast", "findings": []},
                   slow + "\n": {"reward": -1.0, "correct": False, "compiled": True, "reason": "output_mismatch",
                                 "findings": [{"code": "output_mismatch", "severity": "error"}]},
                   busy + "\n": {"error": "deadline exceeded", "status": 504}})
    fn = make_kernel_reward(env=env, mode="profile", config={"trials": 2})
    comps = [[{"role": "assistant", "content": fenced(good)}], fenced(slow), "I cannot do this", fenced(busy)]
    out, extra, metrics = call(fn, comps, [PROBLEM] * 4, ["a", "b", "c", "d"])
    assert out == [3.0, -1.0, -1.0, None]  # the unscorable sample is None, never a silent -1
    assert extra[1]["codes"] == ["output_mismatch"] and extra[2]["reason"].startswith("no_solution")
    assert extra[3]["reason"].startswith("unscorable") and extra[0]["format"] == "file"
    assert metrics["kernel/unscorable"] == 0.25 and metrics["kernel/frac_+3"] == pytest.approx(1 / 3)
    assert [s[:2] for s in env.seen] == [("a", "profile"), ("b", "profile"), ("d", "profile")]  # c never evaluated


def test_reward_refuses_a_bad_row():
    env = FakeEnv({"class ModelNew: pass\n": {"error": "problem p failed to import: NameError", "status": 400}})
    fn = make_kernel_reward(env=env)
    with pytest.raises(ShiftkitError, match="row 0.*failed to import"):
        call(fn, [fenced("class ModelNew: pass")], [PROBLEM])
    with pytest.raises(ShiftkitError, match="no problem source"):
        call(fn, [fenced("class ModelNew: pass")], [""])
    with pytest.raises(ShiftkitError, match="mode"):
        make_kernel_reward(env=env, mode="fast")


def test_reward_signature_needs_the_problem_column():
    assert needed_columns(make_kernel_reward(env=FakeEnv({}))) == ["problem"]


def test_dataset_from_problem_dir_and_synth_output(tmp_path):
    r = build_dataset(FIX / "problems", tmp_path / "d.jsonl")
    rows = [json.loads(x) for x in (tmp_path / "d.jsonl").read_text().splitlines()]
    assert r["rows"] == len(rows) == len(list((FIX / "problems").glob("*.py"))) - (1 if (FIX / "problems/__init__.py").exists() else 0)
    row = next(x for x in rows if x["problem_name"] == "scale_shift_clamp")
    assert row["problem"] == PROBLEM and row["prompt"][0]["role"] == "system" and PROBLEM.strip() in row["prompt"][1]["content"]
    synth = tmp_path / "synth"
    synth.mkdir()
    (synth / "dataset.jsonl").write_text(json.dumps({"id": "synth_s0_00001", "code": PROBLEM, "data_source": "torch#2"}) + "\n")
    build_dataset(synth, tmp_path / "s.jsonl", chat=False)
    s = json.loads((tmp_path / "s.jsonl").read_text())
    assert s["problem_name"] == "synth_s0_00001" and s["data_source"] == "torch#2" and isinstance(s["prompt"], str)
    (synth / "dataset.jsonl").write_text(json.dumps({"id": "x", "code": "print(1)"}) + "\n")
    with pytest.raises(ShiftkitError, match="not a KernelBench-format"):
        load_problem_rows(synth)
    assert "```python model_new.py" in render_prompt(PROBLEM, chat=False)


@pytest.mark.slow
def test_reward_on_the_real_environment_both_formats():
    """One fenced file and the same solution as a workspace are both judged correct (+1 in verify mode);
    a hack that returns the input is -1."""
    kernel_src = CORRECT.split('SRC = r"""')[1].split('"""')[0]
    ws_model = CORRECT.split("lib = load_c(")[1].split("\n", 1)[1]
    ws_model = "import torch\nimport torch.nn as nn\nimport kernel_ext as lib\n" + ws_model
    workspace = fenced(ws_model, "python model_new.py") + fenced(kernel_src, "cpp kernels/ssc.cpp")
    noop = CORRECT.replace("lib.scale_shift_clamp(x, self.weight, self.bias, y, x.shape[0], x.shape[1])\n        return y",
                           "return x")
    assert noop != CORRECT
    fn = make_kernel_reward(env=LocalKernelEnv(), mode="verify", config={"trials": 2})
    out, extra, _ = call(fn, [fenced(CORRECT), workspace, fenced(noop)], [PROBLEM] * 3, ["scale_shift_clamp"] * 3)
    assert out == [1.0, 1.0, -1.0], extra
    assert extra[1]["format"] == "workspace" and extra[2]["codes"]


def test_configure_binds_the_registered_reward_to_a_service():
    from shiftkit.kernels import reward_fn as R

    try:
        R.configure(kernel_env_url="http://127.0.0.1:9", mode="verify")  # nothing listens on port 9
        with pytest.raises(ShiftkitError, match="unreachable.*kernels serve"):
            call(R.kernel_reward, [fenced("class ModelNew: pass")], [PROBLEM])
        out, extra, _ = call(R.kernel_reward, ["no answer"], [PROBLEM])  # no request needed: -1
        assert out == [-1.0]
    finally:
        R._CONFIGURED.clear()
    with pytest.raises(ShiftkitError, match="kernel_env_url must be http"):
        R.configure(kernel_env_url="127.0.0.1:8000")


def test_kernels_dataset_command(tmp_path, capsys):
    from shiftkit.cli import main

    out = tmp_path / "rows.jsonl"
    assert main(["kernels", "dataset", str(FIX / "problems"), f"out={out}", "format=text", "--json"]) == 0
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert rows and all(isinstance(r["prompt"], str) and "class Model" in r["problem"] for r in rows)
    assert main(["kernels", "dataset", str(tmp_path / "missing"), "--out", str(out)]) == 2
    assert "kernels dataset" in capsys.readouterr().err
