"""One ReAct episode: the model sees the problem and the skill, calls tools in a private workspace,
and gets a final reward from the kernel environment. One readable loop: :func:`run_episode`.

Budgets (turns, context tokens, wall time) end the episode with a recorded outcome; a model that
never calls ``finish`` ends at ``max_turns``. Malformed tool calls, unknown tools, sandbox violations
and tool timeouts are answered with an error observation and counted; they never end the episode.
An unreachable endpoint ends it with outcome ``model_error``. Whatever happens, the trajectory is
written (JSONL, :mod:`shiftkit.agent.trajectory`) and the final reward is the environment's reward of
the final workspace sources (-1 when there are none). A final evaluation the environment could not
judge (a ``kernel_env_url`` service unreachable, full or past its deadline; a harness failure) leaves
the episode *unscorable*: ``final_reward`` is None and ``final_eval.unscorable`` is true, never a -1.

The kernel tools run in this process, or on the environment of the :class:`KernelServiceKeys`
(``kernel_env_url=`` a ``shiftkit kernels serve`` service, ``kernel_slots=`` a local pool).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
import uuid
from pathlib import Path

from shiftkit.agent import tools as T
from shiftkit.agent.clients import ModelClient, ModelError
from shiftkit.agent.workspace import Workspace
from shiftkit.errors import ShiftkitError
from shiftkit.io import JsonlWriter
from shiftkit.rewards import KernelServiceKeys

SKILLS_DIR = Path(__file__).parent / "skills"


@dataclasses.dataclass
class AgentToolKeys:
    """The agent's tools and skill (``agent run``/``bench``, ``agent train task=kernels``), declared once."""

    backend: str = "cpu"  # the kernel backend (and its SKILL.md): cpu | cuda
    tools: list[str] = dataclasses.field(default_factory=lambda: list(T.DEFAULT_TOOLS))  # the tools the agent may call
    skill_in_prompt: bool = True  # SKILL.md in the system prompt (else only in the workspace)
    tool_timeout_s: float = 300.0  # wall-clock limit of one tool call (a timeout is an observation)

    def check_tool_keys(self, where: str = "agent") -> None:
        unknown = [n for n in self.tools if n not in T.TOOLS]
        if unknown:
            raise ShiftkitError(f"{where}: unknown tool(s) {', '.join(unknown)}; known: {', '.join(T.TOOLS)}")
        if not (SKILLS_DIR / self.backend / "SKILL.md").is_file():
            raise ShiftkitError(f"{where}: no SKILL.md for backend {self.backend!r}; have: "
                                f"{', '.join(p.name for p in SKILLS_DIR.iterdir())}")


@dataclasses.dataclass
class AgentConfig(AgentToolKeys, KernelServiceKeys):
    max_turns: int = 30
    max_tokens: int = 32768  # context budget per episode (prompt + completion of the latest turn)
    max_tokens_per_turn: int = 2048
    wall_time_s: float = 1800.0
    final_eval: str = "profile"  # profile | verify | none
    workspace_dir: str = ""  # parent of the per-episode workspaces ("" = system temp)
    keep_workspace: bool = False
    # kernel-environment settings for the tools (EvalConfig fields, smaller than its defaults: tools are called often)
    eval_trials: int = 3
    eval_timed_calls: int = 10
    eval_warmup: int = 2
    eval_timeout_s: float = 60.0
    eval_baseline_compile: bool = True

    def validate(self) -> None:
        if self.final_eval not in ("profile", "verify", "none"):
            raise ShiftkitError(f"final_eval must be profile, verify or none, got {self.final_eval!r}")
        if self.max_turns < 1 or self.max_tokens < 1 or self.max_tokens_per_turn < 1:
            raise ShiftkitError("max_turns, max_tokens and max_tokens_per_turn must be >= 1")
        if self.kernel_slots < 0 or (self.kernel_env_url and not self.kernel_env_url.startswith(("http://", "https://"))):
            raise ShiftkitError(f"kernel_env_url must be http(s)://HOST:PORT and kernel_slots >= 0, got "
                                f"{self.kernel_env_url!r}, {self.kernel_slots}")
        if self.kernel_env_token and not self.kernel_env_url:
            raise ShiftkitError("kernel_env_token is only read with a service (kernel_env_url)")
        self.check_tool_keys()

    def make_env(self):
        """The tools' :class:`~shiftkit.kernels.envclient.KernelEnv`: the service, a local pool, or None (this process)."""
        if not self.kernel_env_url and not self.kernel_slots:
            return None
        from shiftkit.kernels.envclient import make_env

        return make_env(self.kernel_env_url, self.kernel_env_token, slots=self.kernel_slots)

    def eval_config(self):
        from shiftkit.kernels import EvalConfig

        return EvalConfig(backend=self.backend, trials=self.eval_trials, timed_calls=self.eval_timed_calls,
                          warmup=self.eval_warmup, timeout_s=self.eval_timeout_s, baseline_compile=self.eval_baseline_compile)


def skill_text(backend: str) -> str:
    return (SKILLS_DIR / backend / "SKILL.md").read_text()


SYSTEM = ("You are a performance engineer. You work in a private workspace through tools only. "
          "Follow the skill specification below.\n\n{skill}")
USER = ("Write ModelNew for the reference problem below (also in model.py), faster than PyTorch and exactly "
        "equivalent. Use the tools; call finish when done.\n\n```python\n{source}\n```")
NO_CALL = "No tool call found. Call one of the tools ({tools}), or finish."
BAD_BLOCK = "error: malformed tool call ({errs}). Write calls as <tool_call>{{\"name\": ..., \"arguments\": {{...}}}}</tool_call>."


def initial_messages(problem, cfg: AgentConfig) -> list[dict]:
    skill = skill_text(cfg.backend) if cfg.skill_in_prompt else "(read SKILL.md in the workspace)"
    return [{"role": "system", "content": SYSTEM.format(skill=skill)},
            {"role": "user", "content": USER.format(source=problem.source.strip())}]


def _state_hash(ws: Workspace) -> str:
    h = hashlib.sha256()
    for f in ws.list("."):
        if f["mode"] == "rw":
            h.update(f["path"].encode() + b"\0" + ws.read(f["path"]).encode() + b"\0")
    return h.hexdigest()[:16]


def run_episode(problem, client: ModelClient, cfg: AgentConfig | None = None, out: str | Path | None = None,
                episode_id: str | None = None) -> dict:
    """Run one episode; returns the ``end`` event (plus ``path`` and ``events``). Never raises for model or
    tool failures."""
    from shiftkit.kernels import Problem, load_problem

    cfg = cfg or AgentConfig()
    cfg.validate()
    problem = problem if isinstance(problem, Problem) else load_problem(problem)
    episode_id = episode_id or uuid.uuid4().hex[:12]
    skill = skill_text(cfg.backend)
    ws = Workspace.create(problem.source, skill, cfg.workspace_dir or None)
    ctx = T.ToolContext(ws, problem, cfg.eval_config(), env=cfg.make_env())
    schemas = T.tool_schemas(cfg.tools)
    events: list[dict] = []
    writer = JsonlWriter(out, append=False) if out else None
    t_start = time.perf_counter()

    def emit(ev: dict) -> None:
        events.append(ev)
        if writer:
            writer.write(ev)

    def add_message(turn: int, msg: dict, **extra) -> None:
        messages.append(msg)
        emit({"type": "message", "turn": turn, "message": msg, "t": round(time.perf_counter() - t_start, 4), **extra})

    emit({"type": "header", "version": 1, "episode_id": episode_id,
          "problem": {"name": problem.name, "path": str(problem.path), "hash": problem.hash},
          "backend": cfg.backend, "client": getattr(client, "name", type(client).__name__),
          "config": dataclasses.asdict(cfg), "tools": schemas, "skill_sha": hashlib.sha256(skill.encode()).hexdigest()[:16],
          "workspace": str(ws.root)})
    messages: list[dict] = []
    for m in initial_messages(problem, cfg):
        add_message(0, m)
    counts = {"turns": 0, "tool_calls": 0, "malformed": 0, "sandbox_violations": 0, "read_only": 0, "timeouts": 0,
              "tool_errors": 0, "no_tool_call": 0, "repeated_calls": 0, "completion_tokens": 0, "context_tokens": 0}
    rewards: list[dict] = []
    seen_actions: set[str] = set()
    model_s = tools_s = 0.0
    outcome, error = "max_turns", None
    try:
        for turn in range(1, cfg.max_turns + 1):
            if time.perf_counter() - t_start > cfg.wall_time_s:
                outcome = "wall_time"
                break
            left = cfg.max_tokens - counts["context_tokens"]
            if left <= 0:
                outcome = "max_tokens"
                break
            try:
                at = client.chat(messages, schemas, min(cfg.max_tokens_per_turn, left))
            except ModelError as e:
                outcome, error = "model_error", str(e)
                break
            model_s += at.latency_s
            counts["turns"] = turn
            counts["completion_tokens"] += at.completion_tokens
            counts["context_tokens"] = max(counts["context_tokens"], at.prompt_tokens + at.completion_tokens)
            msg = at.message
            calls = []
            for c in msg.get("tool_calls") or []:  # every call needs an id for its answer
                c = dict(c)
                c.setdefault("id", "call_" + uuid.uuid4().hex[:12])
                c.setdefault("type", "function")
                calls.append(c)
            if calls:
                msg = {**msg, "tool_calls": calls}
            add_message(turn, msg, usage={"prompt_tokens": at.prompt_tokens, "completion_tokens": at.completion_tokens,
                                          "finish_reason": at.finish_reason, "latency_s": round(at.latency_s, 4)},
                        parse_errors=at.parse_errors)
            if at.parse_errors:
                counts["malformed"] += len(at.parse_errors)
                add_message(turn, {"role": "user", "content": BAD_BLOCK.format(errs="; ".join(at.parse_errors))})
            elif not calls:
                counts["no_tool_call"] += 1
                add_message(turn, {"role": "user", "content": NO_CALL.format(tools=", ".join(cfg.tools))})
            finished = False
            for c in calls:
                f = c.get("function") or {}
                name, raw = f.get("name", ""), f.get("arguments", "")
                action = json.dumps([name, raw, _state_hash(ws)], sort_keys=True, default=str)
                repeated = action in seen_actions
                seen_actions.add(action)
                counts["repeated_calls"] += int(repeated)
                t0 = time.perf_counter()
                r = T.call_tool(ctx, name, raw, cfg.tools, cfg.tool_timeout_s)
                dt = time.perf_counter() - t0
                tools_s += dt
                counts["tool_calls"] += 1
                counts["malformed"] += int(r.kind in ("malformed", "unknown_tool"))
                counts["sandbox_violations"] += int(r.kind == "sandbox_violation")
                counts["read_only"] += int(r.kind == "read_only")
                counts["timeouts"] += int(r.kind == "timeout")
                counts["tool_errors"] += int(r.kind == "error")
                add_message(turn, {"role": "tool", "tool_call_id": c["id"], "name": name, "content": r.observation})
                emit({"type": "tool_result", "turn": turn, "call_id": c["id"], "name": name, "arguments": raw, "ok": r.ok,
                      "kind": r.kind, "seconds": round(dt, 4), "reward": r.reward, "data": r.data, "repeated": repeated})
                if r.reward is not None:
                    rewards.append({"turn": turn, "tool": name, "reward": r.reward})
                finished = finished or r.finish
            if finished:
                outcome = "finished"
                break
        final_eval, final_reward = final_evaluation(ctx, cfg)
    except Exception as e:  # noqa: BLE001 - a harness bug still leaves a trajectory behind
        outcome, error = "harness_error", f"{type(e).__name__}: {e}"
        final_eval, final_reward = {"reason": f"unscorable: {error}", "unscorable": True}, None
    finally:
        if ctx.env is not None:
            ctx.env.close()
    end = {"type": "end", "outcome": outcome, "error": error, "final_reward": final_reward, "final_eval": final_eval,
           "rewards": rewards, "counts": counts,
           "timings": {"total_s": round(time.perf_counter() - t_start, 3), "model_s": round(model_s, 3), "tools_s": round(tools_s, 3)}}
    emit(end)
    if writer:
        writer.close()
    if not cfg.keep_workspace:
        ws.close()
    return {**end, "path": str(out) if out else None, "events": events}


def final_evaluation(ctx: T.ToolContext, cfg: AgentConfig) -> tuple[dict | None, float | None]:
    """The final evaluation and reward; ``None`` (unscorable) when the environment could not judge it."""
    if not ctx.workspace.has_solution():
        return {"reason": "no model_new.py in the workspace"}, -1.0
    if cfg.final_eval == "none":
        last = ctx.last_eval
        return last, float(last["reward"]) if last else -1.0
    try:
        d = T.run_env(ctx, cfg.final_eval)
    except (ValueError, FileNotFoundError) as e:  # the workspace's sources are not a loadable solution
        return {"reason": f"final evaluation refused the workspace: {e}"}, -1.0
    except Exception as e:  # noqa: BLE001 - T.Unjudged (service unreachable, full, deadline) or a harness failure
        return {"reason": f"unscorable: the final evaluation could not be judged: {type(e).__name__}: {e}",
                "unscorable": True}, None
    return d | {"mode": cfg.final_eval}, float(d["reward"])


def replay(path: str | Path, problem=None, cfg: AgentConfig | None = None, out: str | Path | None = None) -> dict:
    """Re-run a recorded episode: the recorded assistant messages drive a fresh workspace."""
    from shiftkit.agent.clients import ScriptedClient
    from shiftkit.agent.trajectory import load_trajectory

    ev = load_trajectory(path)
    head = ev[0]
    steps = [e["message"] for e in ev if e.get("type") == "message" and e["message"]["role"] == "assistant"]
    if cfg is None:
        known = {f.name for f in dataclasses.fields(AgentConfig)}
        cfg = AgentConfig(**{k: v for k, v in head["config"].items() if k in known})
    return run_episode(problem or head["problem"]["path"], ScriptedClient(steps, name=f"replay:{Path(path).name}"), cfg, out)
