"""The kernel reward trains through the loops (issue 18): ``rl reward=kernel`` and ``agent train task=kernels``.

Fast: the keys (the registry name, keys a run would not read are errors), token-exact kernel episodes with
the observation budget recorded, an unscorable episode carries no loss, an unreachable service leaves an
agent episode unscorable (not -1). Slow: both loops on the real environment (in process) run end to end
and a killed run resumes bit for bit; the reward and the tools give the same verdicts through a
``shiftkit kernels serve`` process as in process.
"""

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from shiftkit import loopkit
from shiftkit.agent import kernel_grammar as KG
from shiftkit.agent import tools as T
from shiftkit.agent.kernel_task import KernelTask
from shiftkit.agent.rl import AgenticRLConfig, run_agentic_rl, scorable_rewards
from shiftkit.agent.batches import collate
from shiftkit.errors import ShiftkitError
from shiftkit.kernels import reward_fn as R
from shiftkit.kernels.envclient import KernelEnv
from shiftkit.models import WEAK_SPEC, make_char_tokenizer, make_tiny_model, save_model
from shiftkit.rewards import Rewards
from shiftkit.rl import GRPOConfig, run_grpo
from shiftkit.sampling import Rollouts

REPO = Path(__file__).resolve().parents[2]
FIX = REPO / "shiftkit/kernels/fixtures"
PROBLEM = (FIX / "problems/scale_shift_clamp.py").read_text()
CORRECT = (FIX / "solutions/scale_shift_clamp/correct.py").read_text()
WRONG = CORRECT.replace("1.f ? 1.f : v", "0.5f ? 0.5f : v").replace('name="scale_shift_clamp"', 'name="ssc_wrong"')
GRAMMAR = ["g_ew_clamp_1024x1024", "g_red_sumsq_1024x1024"]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    d = tmp_path_factory.mktemp("tiny") / "m"
    save_model(make_tiny_model(WEAK_SPEC, seed=0), make_char_tokenizer(), d)
    return d


def _rows(path: Path, rows: list[dict]) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def _grammar_rows(tmp_path, names=GRAMMAR, name="rows.jsonl") -> str:
    return _rows(tmp_path / name, [r for r in KG.rl_rows("train") + KG.rl_rows("heldout") if r["problem_name"] in names])


def _metrics(run: Path) -> list[dict]:
    return [{k: v for k, v in r.items() if not k.startswith("time/") and k not in ("step_time",)}
            for r in map(json.loads, (run / "metrics.jsonl").read_text().splitlines())]


def _odd(text: str) -> bool:
    return sum(map(ord, text)) % 2 == 1


def _same_weights(a: Path, b: Path) -> bool:
    wa, wb = load_file(str(a / "final" / "model.safetensors")), load_file(str(b / "final" / "model.safetensors"))
    return wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)


class Killed(Exception):
    pass


def _kill_after(monkeypatch, step: int):
    real = loopkit.log_step

    def log_then_die(st, s, row, *a, **k):
        real(st, s, row, *a, **k)
        if s == step:
            raise Killed

    monkeypatch.setattr(loopkit, "log_step", log_then_die)


class TableEnv(KernelEnv):
    """A deterministic stand-in environment: the grammar's shortcuts (and the wrong fixture) -1, anything else
    +1 in verify and +2 in profile mode; ``down`` answers 503 (nothing could judge it). Records requests."""

    def __init__(self, down: bool = False):
        self.down, self.seen = down, []

    def evaluate(self, problem, solution, mode="verify", config=None, problem_name="problem"):
        src = solution if isinstance(solution, str) else solution["model_new.py"]
        self.seen.append((problem_name, mode))
        if self.down:
            return {"error": "the queue is full", "status": 503}
        wrong = any(w in src for w in ("k += 2", "y[r * cols + k] = v;", "acc += v;", "y[r] += v;", "0.5f ? 0.5f"))
        r = -1.0 if wrong else (1.0 if mode == "verify" else 2.0)
        return {"reward": r, "correct": r > 0, "compiled": True, "reason": "output_mismatch" if r < 0 else "correct",
                "findings": [], "compile_errors": []}


# ----------------------------------------------------------------------------- keys


def test_kernel_reward_by_name_and_keys_a_run_would_not_read_are_errors():
    r = Rewards(["kernel"])
    assert r.names == ["kernel"] and r.fns[0] is R.kernel_reward and r.needs == {"kernel": ["problem"]}
    base = dict(model="m", data="d.jsonl")
    for bad, word in [(dict(kernel_mode="verify"), "kernel_mode"), (dict(kernel_env_url="http://h:1"), "kernel_env_url"),
                      (dict(reward=["kernel"], kernel_env_token="t"), "kernel_env_token"),
                      (dict(reward=["kernel"], kernel_env_url="http://h:1", kernel_slots=2), "kernel_slots"),
                      (dict(reward=["kernel"], kernel_mode="fast"), "kernel_mode must be")]:
        with pytest.raises(ShiftkitError, match=word):
            GRPOConfig(**base, **bad).validate()
    GRPOConfig(**base, reward=["kernel"], kernel_env_url="http://h:1", kernel_mode="verify",
               kernel_config={"trials": 2}).validate()
    GRPOConfig(**base, reward=["pkg.mod:fn"], kernel_env_url="http://h:1").validate()  # a user function may judge kernels
    for bad, word in [(dict(kernel_env_url="http://h:1"), "task=kernels"), (dict(task="kernels", data="d"), "model="),
                      (dict(task="kernels", model="m", data="d", eval_every=0, warm_steps=3), "warm_steps"),
                      (dict(task="kernels", model="m", data="d", eval_every=0, kernel_config={"backend": "cuda"}),
                       "cannot be set per request")]:
        with pytest.raises(ShiftkitError, match=word):
            AgenticRLConfig(**bad).validate()


# ----------------------------------------------------------------------------- episodes


class Script:
    """A sampler (the call of shiftkit.sampling.sample on token contexts) that answers each turn with text."""

    def __init__(self, fn):
        self.fn, self.calls = fn, []

    def __call__(self, tok, prompt_ids, max_new_tokens, temperature, greedy=False, row_seeds=None, **kw):
        from shiftkit.prompts import left_pad, right_pad

        texts = [self.fn(tok.decode(p, skip_special_tokens=True)) for p in prompt_ids]
        comp = [tok(t, add_special_tokens=False)["input_ids"] + [tok.eos_token_id] for t in texts]
        self.calls.append(comp)
        p, pm = left_pad(prompt_ids, tok.pad_token_id)
        c, cm = right_pad(comp, tok.pad_token_id)
        return Rollouts(p, pm, c, cm, torch.zeros(c.shape), torch.ones(len(comp), dtype=torch.bool), texts)


def _task(tmp_path, monkeypatch, env, **kw):
    import shiftkit.kernels.envclient as EC

    monkeypatch.setattr(EC, "make_env", lambda *a, **k: env)
    cfg = AgenticRLConfig(task="kernels", model="unused", data=kw.pop("data", None) or _grammar_rows(tmp_path),
                          eval_every=0, max_turns=3, max_new_tokens=40, **kw)
    cfg.validate()
    return KernelTask(cfg), make_char_tokenizer()


def test_grammar_episodes_are_token_exact_and_the_observation_budget_is_recorded(tmp_path, monkeypatch):
    task, tok = _task(tmp_path, monkeypatch, TableEnv(), actions="grammar", obs_max_tokens=6)
    turns = {0: " verify cr 16 simd off drop_op", 1: " nonsense", 2: " rc 16 simd off exact"}
    script = Script(lambda ctx: turns[ctx.count("\nkernel:") - 1])
    rows_in = task.draw(0, 0, 2)
    eps, rows = task.rollouts(None, tok, rows_in, [1, 2], sampler=script)
    for ep, (ids, gen), r in zip(eps, rows, rows_in):
        want, mask = tok(KG.prompt_for(KG.PROBLEMS[r["problem_name"]]), add_special_tokens=False)["input_ids"], []
        mask = [0] * len(want)
        for t in range(3):  # the sampled tokens verbatim (gen 1), then the observation's encoding (gen 0)
            sampled = script.calls[t][eps.index(ep)]
            want, mask = want + sampled, mask + [1] * len(sampled)
            if t < 2:
                o = tok(ep.observations[t], add_special_tokens=False)["input_ids"]
                want, mask = want + o, mask + [0] * len(o)
        assert (ids, gen) == (want, mask)
        assert ep.observations[0] == "\n= -1 out\n[... 12 tokens cut]\nkernel:"  # "-1 output_mismatch", cut to 6 tokens
        assert ep.counts["malformed"] == 1 and ep.counts["verify_calls"] == 1 and ep.counts["obs_truncated"] == 2
        assert ep.finished and ep.submitted == "rc 16 simd off exact" and ep.reward == 2.0
    task.close()


def test_grammar_reward_and_episodes_in_verify_mode(tmp_path, monkeypatch):
    """``kernel_mode=verify`` reaches the grammar episode's final evaluation, and ``grammar_verify_reward``
    asks for verify: +1/-1, never a timing milestone."""
    env = TableEnv()
    task, tok = _task(tmp_path, monkeypatch, env, actions="grammar", kernel_mode="verify")
    eps, _ = task.rollouts(None, tok, task.draw(0, 0, 2), [0, 1], sampler=Script(lambda ctx: " rc 16 simd off exact"))
    assert [e.reward for e in eps] == [1.0, 1.0] and {m for _, m in env.seen} == {"verify"}
    task.close()
    env.seen.clear()
    r = KG.grammar_verify_reward(["", ""], ["rc 16 simd off exact", "cr 16 simd off drop_op"], GRAMMAR, env=env)
    assert r == [1.0, -1.0] and {m for _, m in env.seen} == {"verify"}
    assert KG.grammar_reward([""], ["rc 16 simd off exact"], GRAMMAR[:1], env=env) == [2.0]  # profile by default


def test_tool_episodes_render_observations_after_the_sampled_tokens(tmp_path, monkeypatch):
    env = TableEnv()
    data = _rows(tmp_path / "p.jsonl", [{"problem_name": "scale_shift_clamp", "problem": PROBLEM}])
    task, tok = _task(tmp_path, monkeypatch, env, data=data, actions="tools", skill_in_prompt=False, kernel_mode="verify",
                      obs_max_tokens=40)
    calls = {0: '<tool_call>{"name": "write_file", "arguments": {"path": "model_new.py", "content": %s}}</tool_call>'
                % json.dumps(CORRECT), 1: '<tool_call>{"name": "verify", "arguments": {}}</tool_call>', 2: "done?"}
    script = Script(lambda ctx: calls[ctx.count("<|assistant|>") - 1])
    eps, rows = task.rollouts(None, tok, task.draw(0, 0, 1), [0], sampler=script)
    ep, (ids, gen) = eps[0], rows[0]
    text = tok.decode(ids, skip_special_tokens=False)
    assert text.count("<|tool|>") == 2 and "wrote model_new.py" in text and "No tool call found" in text
    assert tok.decode([t for t, g in zip(ids, gen) if g]) == "".join(c + "<eos>" for c in calls.values())
    assert ep.counts["tool_calls"] == 2 and ep.counts["no_tool_call"] == 1 and ep.counts["obs_truncated"] == 1
    assert not ep.finished and ep.reward == 1.0 and env.seen[-1] == ("scale_shift_clamp", "verify")  # max_turns: final eval
    task.close()


def test_observation_continues_the_template_after_a_sampled_turn_end():
    """Where the template closes an assistant turn with the EOS the policy samples (Qwen's <|im_end|>), the
    observation starts after it: prompt + sampled turn (with EOS) + observation == the template's rendering."""
    from types import SimpleNamespace

    from shiftkit.agent.chat import render_prompt
    from shiftkit.agent.kernel_task import continuation

    tok = SimpleNamespace(chat_template=None, eos_token="<|end|>")  # the plain template ends a turn with <|end|>
    msgs = [{"role": "user", "content": "write it"}]
    turn = {"role": "assistant", "content": "call"}
    new = [{"role": "user", "content": "No tool call found"}]
    sampled = render_prompt(tok, msgs, None) + "call" + tok.eos_token
    assert sampled + continuation(tok, msgs, turn, new, None) == render_prompt(tok, msgs + [turn] + new, None)


def test_an_unscorable_episode_carries_no_loss(tmp_path, monkeypatch):
    task, tok = _task(tmp_path, monkeypatch, TableEnv(down=True), actions="grammar")
    eps, rows = task.rollouts(None, tok, task.draw(0, 0, 2), [0, 1], sampler=Script(lambda ctx: " rc 0 none off exact"))
    assert [e.reward for e in eps] == [None, None] and all(e.final["unscorable"] for e in eps)
    batch = collate(rows, tok.pad_token_id)
    assert batch["gen_BT"].sum() > 0
    assert scorable_rewards(eps, batch).tolist() == [0.0, 0.0] and batch["gen_BT"].sum() == 0
    task.close()


def test_an_unscorable_episode_gives_no_advantage_to_its_group():
    """GRPO in ``agent train``: an unscorable episode is out of its group's mean and std (NaN into
    advantages.group_advantages), so [None, 1, -1, -1] gives the scorable three their own advantages."""
    from types import SimpleNamespace

    from shiftkit import advantages
    from shiftkit.agent.rl import unscorable_nan

    eps = [SimpleNamespace(reward=r) for r in (None, 1.0, -1.0, -1.0)]
    r_B = torch.tensor([0.0, 1.0, -1.0, -1.0])  # scorable_rewards: 0 for the unscorable one
    adv = advantages.group_advantages(unscorable_nan(eps, r_B), 4)
    want = advantages.group_advantages(torch.tensor([1.0, -1.0, -1.0]), 3)
    assert adv[0] == 0 and torch.allclose(adv[1:], want)


def test_agent_episode_with_an_unreachable_service_is_unscorable_not_minus_one(tmp_path):
    from shiftkit.agent.clients import ScriptedClient, call, say
    from shiftkit.agent.episode import AgentConfig, run_episode
    from shiftkit.agent.trajectory import validate_trajectory

    client = ScriptedClient([say("", call("write_file", path="model_new.py", content=CORRECT)), say("", call("finish"))])
    res = run_episode(FIX / "problems/scale_shift_clamp.py", client,
                      AgentConfig(final_eval="verify", kernel_env_url="http://127.0.0.1:9"), tmp_path / "t.jsonl")
    assert res["outcome"] == "finished" and res["final_reward"] is None
    assert res["final_eval"]["unscorable"] and "unreachable" in res["final_eval"]["reason"]
    assert validate_trajectory(res["events"]) == []


# ----------------------------------------------------------------------------- the loops end to end (real environment)


@pytest.mark.slow
def test_rl_reward_kernel_end_to_end_resumes_bit_identically(tmp_path, tiny, monkeypatch):
    """``shiftkit rl reward=kernel kernel_mode=verify`` on the real in-process environment; the tiny policy
    cannot write a kernel, so its answer is mapped to the correct or a wrong solution (by a parity of its text)."""
    monkeypatch.setattr(R, "extract_solution", lambda text: (CORRECT if _odd(text) else WRONG, "one fenced file"))
    data = _rows(tmp_path / "k.jsonl", [{"prompt": "kernel:", "problem": PROBLEM, "problem_name": "scale_shift_clamp"}])

    def cfg(out):
        return GRPOConfig(model=str(tiny), out=str(out), data=data, reward=["kernel"], kernel_mode="verify",
                          kernel_config={"trials": 2}, steps=3, prompts_per_step=1, group_size=4, max_new_tokens=6,
                          lr=1e-3, eval_every=0, save_every=1, samples_every=1, samples_n=4, threads=1, progress=False)

    try:
        run_grpo(cfg(tmp_path / "ref"))
        with monkeypatch.context() as mp:
            _kill_after(mp, 1)
            with pytest.raises(Killed):
                run_grpo(cfg(tmp_path / "run"))
        run_grpo(cfg(tmp_path / "run"))
    finally:
        R._CONFIGURED.clear()
    assert _same_weights(tmp_path / "ref", tmp_path / "run")
    assert _metrics(tmp_path / "ref") == _metrics(tmp_path / "run")
    rows = [json.loads(x) for x in (tmp_path / "run" / "samples.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1] * 4 + [2] * 4 + [3] * 4  # 1-based, as metrics.jsonl
    assert {r["kernel"]["reward"] for r in rows} == {-1.0, 1.0}  # real verdicts, both ways, in samples.jsonl
    assert all(r["reward"] == r["kernel"]["reward"] and r["kernel"]["correct"] == (r["reward"] > 0) for r in rows)
    assert any(r["grad_norm"] > 0 for r in _metrics(tmp_path / "run") if "grad_norm" in r)


@pytest.mark.slow
def test_agent_train_task_kernels_end_to_end_resumes_bit_identically(tmp_path, tiny, monkeypatch):
    """``agent train task=kernels actions=tools`` (PPO, value pretraining, micro-batches) on the real in-process
    environment, ``kernel_mode=verify``: the tiny policy cannot call tools, so each turn's text is replaced
    (after it was sampled and tokenised) by a write_file call of the correct or a wrong solution (by a parity
    of the text). One in-process environment serves the three runs (its verdict cache saves re-verifying)."""
    import shiftkit.kernels.envclient as EC

    env = EC.LocalKernelEnv()
    monkeypatch.setattr(EC, "make_env", lambda *a, **k: env)
    monkeypatch.setattr("shiftkit.agent.kernel_task.parse_tool_calls", lambda text, id_fn: (
        "", [{"id": id_fn(), "type": "function", "function": {"name": "write_file", "arguments": json.dumps(
            {"path": "model_new.py", "content": CORRECT if _odd(text) else WRONG})}}], []))
    data = _rows(tmp_path / "p.jsonl", [{"problem_name": "scale_shift_clamp", "problem": PROBLEM}])

    def cfg(out):
        return AgenticRLConfig(task="kernels", model=str(tiny), data=data, eval_data=data, out=str(out), actions="tools",
                               skill_in_prompt=False, tools=["write_file", "finish"], kernel_mode="verify", kernel_config={"trials": 2}, steps=3,
                               prompts_per_step=1, group_size=4, max_turns=1, max_new_tokens=6, eval_n=2, eval_every=3,
                               value_pretrain_steps=2, value_pretrain_batches=1, token_budget=1500, save_every=1)

    run_agentic_rl(cfg(tmp_path / "ref"))
    with monkeypatch.context() as mp:
        _kill_after(mp, 1)
        with pytest.raises(Killed):
            run_agentic_rl(cfg(tmp_path / "run"))
    summary = run_agentic_rl(cfg(tmp_path / "run"))
    assert _same_weights(tmp_path / "ref", tmp_path / "run")
    rows = _metrics(tmp_path / "run")
    assert rows == _metrics(tmp_path / "ref")
    steps = [r for r in rows if "loss" in r]
    assert len(steps) == 3 and all(r["micro_batches"] >= 2 for r in steps)
    assert any(r["frac_-1"] > 0 for r in steps) and any(r["frac_+1"] > 0 for r in steps)  # real verdicts, both ways
    assert any(r["has_signal"] for r in steps) and summary["value_pretrain"]["steps"] == 2
    assert summary["final_eval"]["unscorable"] == 0.0


# ----------------------------------------------------------------------------- service == in process


@pytest.mark.slow
def test_reward_and_tools_through_a_service_equal_in_process(tmp_path):
    from shiftkit.agent.workspace import Workspace
    from shiftkit.kernels import EvalConfig, load_problem
    from shiftkit.kernels.envclient import make_env
    from shiftkit.rewards import configure_kernel_env

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "shiftkit", "kernels", "serve", f"port={port}", "slots=1", "quiet=true"],
                            env=dict(os.environ, PYTHONPATH=str(REPO), OMP_NUM_THREADS="1"), cwd=tmp_path,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    fence = "```python\n{}\n```"
    answers = [fence.format(CORRECT), fence.format(WRONG), "no code"]
    try:
        for _ in range(120):
            try:
                urllib.request.urlopen(url + "/health", timeout=2).read()
                break
            except OSError:
                time.sleep(0.5)
        got = {}
        for where, u in (("local", ""), ("served", url)):
            c = GRPOConfig(model="m", data="d", reward=["kernel"], kernel_env_url=u, kernel_mode="verify",
                           kernel_config={"trials": 2, "secret_seed": 3})
            configure_kernel_env(c)
            res = Rewards(["kernel"])(["p"] * 3, answers, {"problem": [PROBLEM] * 3, "problem_name": ["scale_shift_clamp"] * 3})
            ws = Workspace.create(PROBLEM, "skill", tmp_path / where)
            ws.write("model_new.py", CORRECT)
            p = tmp_path / "scale_shift_clamp.py"
            p.write_text(PROBLEM)
            ctx = T.ToolContext(ws, load_problem(p), EvalConfig(trials=2, secret_seed=3), env=make_env(u))
            tool = T.call_tool(ctx, "verify", "{}").data
            keep = ("reward", "reason", "correct", "compiled", "codes")
            got[where] = (res.total, [{k: e.get(k) for k in keep} for e in res.extra["kernel"]],
                          {k: v for k, v in tool.items() if k not in ("seconds", "solution_hash")})
        assert got["local"] == got["served"]
        assert got["local"][0] == [1.0, -1.0, -1.0]
        pool = json.loads(urllib.request.urlopen(url + "/health", timeout=10).read())["pool"]
        assert pool["done"] + pool["cached"] >= 3  # the served run's two reward requests and its tool call went there
    finally:
        R._CONFIGURED.clear()
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(20)
