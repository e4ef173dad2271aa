"""The agent loop end to end on the cpu backend, and every bad-input path: each produces a recorded
outcome or observation, never a harness crash."""

import json
import time

import pytest

from shiftkit.agent import tools as T
from shiftkit.agent.chat import parse_tool_calls
from shiftkit.agent.clients import AssistantTurn, OpenAIClient, ScriptedClient, call, say
from shiftkit.agent.episode import AgentConfig, replay, run_episode
from shiftkit.agent.scripted import INJECT_MARK, kernel_fix_script, known_solution_files
from shiftkit.agent.trajectory import load_trajectory, validate_trajectory
from shiftkit.kernels.fixtures import PROBLEMS

SSC = PROBLEMS / "scale_shift_clamp.py"
FAST = dict(eval_baseline_compile=False, eval_timed_calls=5, eval_warmup=1, eval_trials=2)


def tool_msgs(res):
    return [e["message"]["content"] for e in res["events"] if e["type"] == "message" and e["message"]["role"] == "tool"]


def results(res):
    return [e for e in res["events"] if e["type"] == "tool_result"]


def test_scripted_episode_end_to_end(tmp_path):
    out = tmp_path / "ep.jsonl"
    res = run_episode(SSC, kernel_fix_script(known_solution_files("scale_shift_clamp")), AgentConfig(**FAST), out)
    assert res["outcome"] == "finished" and res["error"] is None
    kinds = [(r["name"], r["ok"]) for r in results(res)]
    # the injected compile error is observed (structured), fixed with edit_file, then everything passes
    assert kinds.index(("compile", False)) < kinds.index(("edit_file", True)) < kinds.index(("compile", True))
    first_compile = json.loads(tool_msgs(res)[[n for n, _ in kinds].index("compile")])
    assert first_compile["compile_errors"][0]["line"] and "undeclared_symbol_xyz" in first_compile["compile_errors"][0]["message"]
    assert ("verify", True) in kinds and ("profile", True) in kinds
    assert [r["tool"] for r in res["rewards"]] == ["verify", "profile"] and res["rewards"][0]["reward"] == 1.0
    assert res["final_reward"] >= 1.0 and res["final_eval"]["correct"]
    assert res["counts"]["malformed"] == 0 and res["counts"]["sandbox_violations"] == 0
    ev = load_trajectory(out)
    assert validate_trajectory(ev) == [] and ev[-1]["final_reward"] == res["final_reward"]


def test_trajectory_replays_and_schema_rejects_corruption(tmp_path):
    files = known_solution_files("scale_shift_clamp")
    script = ScriptedClient([say("", call("write_file", path=p, content=t)) for p, t in files.items()]
                            + [say("", call("compile")), say("", call("read_file", path="model_new.py", start_line=1, end_line=3)),
                               say("", call("finish"))])
    cfg = AgentConfig(final_eval="none")
    a = run_episode(SSC, script, cfg, tmp_path / "a.jsonl")
    b = replay(tmp_path / "a.jsonl", out=tmp_path / "b.jsonl")
    assert b["outcome"] == a["outcome"] == "finished"
    assert tool_msgs(a) == tool_msgs(b) and len(tool_msgs(a)) == len(files) + 3
    ev = load_trajectory(tmp_path / "b.jsonl")
    assert validate_trajectory(ev) == []
    bad = [dict(e) for e in ev]
    bad[-1] = {**bad[-1], "outcome": "exploded"}
    del bad[0]["skill_sha"]
    bad.insert(3, {"type": "message", "turn": 1, "t": 0.0, "message": {"role": "tool", "tool_call_id": "nope", "content": "x"}})
    errs = validate_trajectory(bad)
    assert any("skill_sha" in e for e in errs) and any("exploded" in e for e in errs) and any("unknown call" in e for e in errs)


class TextClient:
    """Returns raw model text, parsed like the HF client does (tool calls written as text)."""

    name = "text"

    def __init__(self, texts):
        self.texts = list(texts)

    def chat(self, messages, tools, max_tokens):
        content, calls, errors = parse_tool_calls(self.texts.pop(0))
        m = {"role": "assistant", "content": content, **({"tool_calls": calls} if calls else {})}
        return AssistantTurn(m, 10, 10, parse_errors=errors)


def test_malformed_calls_are_answered_and_counted():
    bad_json = {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": "{path: model.py"}}
    client = ScriptedClient([
        say("", bad_json),
        say("", call("read_file")),  # missing argument
        say("", call("read_file", path="model.py", colour="red")),  # unknown argument
        say("", call("read_file", path=3)),  # wrong type
        say("", call("rm_rf")),  # unknown tool
        say("thinking without acting"),  # no tool call
        say("", call("finish")),
    ])
    res = run_episode(SSC, client, AgentConfig(final_eval="none"))
    obs = tool_msgs(res)
    assert res["outcome"] == "finished" and res["counts"]["malformed"] == 5 and res["counts"]["no_tool_call"] == 1
    assert "not valid JSON" in obs[0] and "missing required argument(s): path" in obs[1]
    assert "unknown argument(s): colour" in obs[2] and "must be string" in obs[3] and "unknown tool 'rm_rf'" in obs[4]
    assert [r["kind"] for r in results(res)][:5] == ["malformed"] * 4 + ["unknown_tool"]
    text = TextClient(['<tool_call>{"name": "list_files", "arguments": {</tool_call>', '<tool_call>{"name": "finish"}</tool_call>'])
    res2 = run_episode(SSC, text, AgentConfig(final_eval="none"))
    assert res2["outcome"] == "finished" and res2["counts"]["malformed"] == 1
    users = [e["message"]["content"] for e in res2["events"] if e["type"] == "message" and e["message"]["role"] == "user"]
    assert "malformed tool call" in users[-1]
    assert validate_trajectory(res["events"]) == [] and validate_trajectory(res2["events"]) == []


def test_tool_timeout_is_an_observation():
    @T.tool("_test_sleepy", "sleeps", {"s": {"type": "number"}}, timeout_s=0.3)
    def _sleepy(ctx, s=2.0):
        time.sleep(s)
        return T.ToolResult(True, "slept")

    try:
        cfg = AgentConfig(final_eval="none", tools=[*T.DEFAULT_TOOLS, "_test_sleepy"])
        res = run_episode(SSC, ScriptedClient([say("", call("_test_sleepy", s=1.5)), say("", call("finish"))]), cfg)
    finally:
        T.TOOLS.pop("_test_sleepy")
    assert res["outcome"] == "finished" and res["counts"]["timeouts"] == 1
    assert "timed out after 0.3 s" in tool_msgs(res)[0] and results(res)[0]["kind"] == "timeout"
    with pytest.raises(KeyError, match="unknown tool"):
        T.get_tool("_test_sleepy")


def test_compile_error_does_not_end_the_episode():
    files = known_solution_files("scale_shift_clamp")
    src = files["model_new.py"].replace("float v =", "float v = nope +")
    client = ScriptedClient([say("", call("write_file", path="model_new.py", content=src)), say("", call("compile")),
                             say("", call("list_files")), say("", call("finish"))])
    res = run_episode(SSC, client, AgentConfig(final_eval="none"))
    obs = json.loads(tool_msgs(res)[1])
    assert res["outcome"] == "finished" and obs["compiled"] is False
    assert obs["compile_errors"][0]["line"] and "nope" in obs["compile_errors"][0]["message"]
    assert results(res)[2]["name"] == "list_files"  # the loop went on after the failure


def test_unreachable_endpoint_is_recorded(tmp_path):
    client = OpenAIClient("http://127.0.0.1:9", timeout_s=5)
    res = run_episode(SSC, client, AgentConfig(), tmp_path / "u.jsonl")
    assert res["outcome"] == "model_error" and "unreachable" in res["error"] and res["final_reward"] == -1.0
    assert validate_trajectory(load_trajectory(tmp_path / "u.jsonl")) == []


def test_model_that_never_finishes_hits_max_turns():
    res = run_episode(SSC, ScriptedClient([], fallback=say("", call("list_files"))), AgentConfig(max_turns=4))
    assert res["outcome"] == "max_turns" and res["counts"]["turns"] == 4
    assert res["counts"]["repeated_calls"] == 3  # same action in the same workspace state
    assert res["final_reward"] == -1.0 and "no model_new.py" in res["final_eval"]["reason"]


def test_budgets_end_the_episode():
    class Big(ScriptedClient):
        def chat(self, m, t, k):
            at = super().chat(m, t, k)
            at.prompt_tokens, at.completion_tokens = 900 * self.i, 200  # the context grows every turn
            return at

    big = Big([say("", call("list_files"))] * 10)
    res = run_episode(SSC, big, AgentConfig(max_tokens=2000, final_eval="none"))
    assert res["outcome"] == "max_tokens" and res["counts"]["turns"] == 2 and res["counts"]["context_tokens"] == 2000
    res = run_episode(SSC, ScriptedClient([say("", call("finish"))]), AgentConfig(wall_time_s=0.0, final_eval="none"))
    assert res["outcome"] == "wall_time" and res["counts"]["turns"] == 0


def test_writes_outside_the_sandbox_are_rejected(tmp_path):
    target = tmp_path / "escaped.py"
    client = ScriptedClient([
        say("", call("write_file", path=str(target), content="x")),
        say("", call("write_file", path="../../escaped.py", content="x")),
        say("", call("write_file", path="model.py", content="class Model: pass")),
        say("", call("edit_file", path="SKILL.md", old_text="#", new_text="")),
        say("", call("write_file", path="kernels/../../x.cpp", content="x")),
        say("", call("read_file", path="/etc/passwd")),
        say("", call("write_file", path="kernels/k.cpp", content="// fine")),
        say("", call("finish")),
    ])
    res = run_episode(SSC, client, AgentConfig(final_eval="none", keep_workspace=True))
    kinds = [r["kind"] for r in results(res)]
    assert kinds == ["sandbox_violation", "sandbox_violation", "read_only", "read_only", "sandbox_violation",
                     "sandbox_violation", "ok", "ok"]
    assert res["counts"]["sandbox_violations"] == 4 and res["counts"]["read_only"] == 2 and res["outcome"] == "finished"
    assert not target.exists()
    from pathlib import Path
    ws = Path(res["events"][0]["workspace"])
    assert (ws / "model.py").read_text().startswith('"""Hand-written') and (ws / "kernels" / "k.cpp").is_file()
