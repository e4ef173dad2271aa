"""The agent's kernel tools through a KernelEnv (``kernel_env_url``): the same request as in process."""

from pathlib import Path

import pytest

from shiftkit.agent import tools as T
from shiftkit.agent.workspace import Workspace
from shiftkit.kernels import EvalConfig, load_problem
from shiftkit.kernels.envclient import KernelEnv, LocalKernelEnv

REPO = Path(__file__).resolve().parents[2]
PROBLEM = REPO / "shiftkit/kernels/fixtures/problems/scale_shift_clamp.py"
CORRECT = (REPO / "shiftkit/kernels/fixtures/solutions/scale_shift_clamp/correct.py").read_text()


class FakeEnv(KernelEnv):
    def __init__(self, answer):
        self.answer, self.seen = answer, []

    def evaluate(self, problem, solution, mode="verify", config=None, problem_name="problem"):
        self.seen.append((problem, solution, mode, config, problem_name))
        return self.answer


def _ctx(tmp_path, env, cfg=None, header=True):
    ws = Workspace.create(PROBLEM.read_text(), "skill", tmp_path)
    ws.write("model_new.py", CORRECT)
    if header:
        ws.write("kernels/extra.h", "#pragma once\n")
    return T.ToolContext(ws, load_problem(PROBLEM), cfg or EvalConfig(), env=env)


def test_tools_send_the_workspace_to_the_env(tmp_path):
    ans = {"compiled": True, "correct": True, "reward": 1.0, "reason": "ok", "findings": [], "compile_errors": [],
           "max_abs_diff": 0.0, "seconds": 1.5}
    env = FakeEnv(ans)
    ctx = _ctx(tmp_path, env, EvalConfig(trials=2, timeout_s=60))
    r = T.call_tool(ctx, "verify", "{}")
    assert r.ok and r.reward == 1.0 and ctx.last_eval["mode"] == "verify"
    (src, files, mode, over, name), = env.seen
    assert src == PROBLEM.read_text() and name == "scale_shift_clamp" and mode == "verify"
    assert files == {"model_new.py": CORRECT, "model.py": PROBLEM.read_text(), "kernels/extra.h": "#pragma once\n"}
    assert over == {"trials": 2}  # the server owns timeout_s and the sandbox
    T.call_tool(ctx, "verify", "{}")
    assert len(env.seen) == 1  # cached per content hash within the episode


def test_an_env_error_is_a_tool_error_not_a_reward(tmp_path):
    ctx = _ctx(tmp_path, FakeEnv({"error": "the evaluation queue is full", "status": 503}))
    r = T.call_tool(ctx, "profile", "{}")
    assert not r.ok and r.kind == "error" and "503" in r.observation and r.reward is None


@pytest.mark.slow
def test_tools_in_process_and_through_an_env_agree(tmp_path):
    cfg = EvalConfig(trials=2, secret_seed=5)
    a = T.call_tool(_ctx(tmp_path / "a", None, cfg, header=False), "verify", "{}").data
    b = T.call_tool(_ctx(tmp_path / "b", LocalKernelEnv(), cfg, header=False), "verify", "{}").data
    drop = ("seconds", "solution_hash")
    assert {k: v for k, v in a.items() if k not in drop} == {k: v for k, v in b.items() if k not in drop}
    assert a["correct"] is True and a["reward"] == 1.0
