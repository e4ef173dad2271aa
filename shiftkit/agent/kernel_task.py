"""Kernel problems as a multi-turn RL task (``shiftkit agent train task=kernels``): token-exact episodes
whose tools compile, verify and profile through the kernel environment, and whose final evaluation
gives the reward.

Rows (``data=``, held-out ``eval_data=``) are kernel problems with TRL's conventions: a JSONL with the
``problem`` source and ``problem_name`` (``shiftkit kernels dataset`` output), ``agent synth`` output or
a directory of KernelBench-format files (:func:`shiftkit.kernels.reward_fn.load_problem_rows`). Each
row's source is written to a temporary file and loaded (:func:`shiftkit.kernels.load_problem`), so a
row that is not a problem stops the run before anything is written.

An episode gets a private workspace (:mod:`shiftkit.agent.workspace`) and a
:class:`~shiftkit.agent.tools.ToolContext` on the run's environment (``kernel_env_url=`` a ``shiftkit
kernels serve`` service; else this process, ``kernel_slots=`` a local pool). The policy's turns are
sampled on the episode's token row and the observations appended to it (:func:`shiftkit.agent.turns.multi_turn`),
so the tokens trained on are the tokens sampled. Every tool output is cut to ``obs_max_tokens`` tokens
(the cut is marked in the text and counted: ``obs_truncated``, ``obs_tokens_cut``). Two action languages:

* ``actions=tools``: the agent's tools (:data:`shiftkit.agent.tools.TOOLS`) called in text as
  ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` (:func:`shiftkit.agent.chat.parse_tool_calls`),
  after the agent's prompt (system + SKILL.md + the problem) rendered by the tokenizer's chat template
  (or the plain one). Observations are what the template renders after the assistant's turn: the tool
  messages and the next assistant header (the template must be prefix-stable). ``finish`` ends the
  episode; the final evaluation (``kernel_mode``) of the workspace's sources is the reward.
* ``actions=grammar``: the kernel-grammar task (:mod:`shiftkit.agent.kernel_grammar`): a turn is a
  composition (``rc 16 simd off exact``: write it as ``model_new.py`` and submit) or ``verify`` and a
  composition (write it, run the ``verify`` tool, see ``= +1 correct`` or ``= -1 output_mismatch``, and
  go on). The final reward is :func:`~shiftkit.agent.kernel_grammar.grammar_reward` (in ``kernel_mode``)
  of the submitted (else the last written) composition: the single-turn task's reward, the same request.

An episode without a solution scores -1; one whose final evaluation the environment could not judge is
unscorable (reward None): it carries no loss and is left out of the means.
"""

from __future__ import annotations

import dataclasses
import hashlib
import random
import shutil
import tempfile
import types
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from shiftkit.agent import kernel_grammar as KG
from shiftkit.agent import tools as T
from shiftkit.agent.chat import parse_tool_calls, render_prompt
from shiftkit.agent.episode import BAD_BLOCK, NO_CALL, final_evaluation, initial_messages, skill_text
from shiftkit.agent.turns import multi_turn
from shiftkit.agent.workspace import Workspace
from shiftkit.errors import ShiftkitError
from shiftkit.models import load_model_and_tokenizer

LEVELS = (-1.0, 1.0, 2.0, 3.0)
_SENTINEL = "\x00SHIFTKIT_TURN_END\x00"


@dataclasses.dataclass
class KernelEpisode:
    row: dict  # problem_name, problem
    problem: object  # shiftkit.kernels.Problem
    ctx: T.ToolContext
    messages: list = dataclasses.field(default_factory=list)  # actions=tools: the conversation so far
    turns: list = dataclasses.field(default_factory=list)  # the policy's decoded turns
    observations: list = dataclasses.field(default_factory=list)
    counts: dict = dataclasses.field(default_factory=lambda: {
        "turns": 0, "tool_calls": 0, "verify_calls": 0, "malformed": 0, "no_tool_call": 0, "obs_truncated": 0,
        "obs_tokens_cut": 0})
    finished: bool = False
    submitted: str | None = None  # actions=grammar: the composition written last (compact)
    reward: float | None = None
    final: dict | None = None


def cut_observation(tok, text: str, budget: int, ep: KernelEpisode) -> str:
    """``text`` cut to ``budget`` tokens (0 = no cut), the cut marked in the text and counted in ``ep``."""
    if budget <= 0:
        return text
    ids = tok(text, add_special_tokens=False)["input_ids"]
    if len(ids) <= budget:
        return text
    ep.counts["obs_truncated"] += 1
    ep.counts["obs_tokens_cut"] += len(ids) - budget
    return tok.decode(ids[:budget], skip_special_tokens=True) + f"\n[... {len(ids) - budget} tokens cut]"


def continuation(tok, messages: list[dict], turn: dict, new: list[dict], tools: list[dict] | None) -> str:
    """What the chat template writes after the policy's turn (whose sampled tokens end with EOS): the rest
    of the turn's closing, the ``new`` messages and the next assistant header."""
    base = render_prompt(tok, messages + [turn], tools, add_generation_prompt=False)
    full = render_prompt(tok, messages + [turn] + new, tools, add_generation_prompt=True)
    probe = render_prompt(tok, messages + [{"role": "assistant", "content": _SENTINEL}], tools, add_generation_prompt=False)
    if not full.startswith(base) or _SENTINEL not in probe:
        raise ShiftkitError("actions=tools: the tokenizer's chat template is not prefix-stable, so observations "
                            "cannot be appended to the sampled tokens; use a template that is (the plain one is)")
    tail = probe[probe.rindex(_SENTINEL) + len(_SENTINEL):]
    eos = tok.eos_token or ""
    if eos and tail.startswith(eos):  # the policy sampled it
        tail = tail[len(eos):]
    return tail + full[len(base):]


class ToolActions:
    """``actions=tools``: the agent's tools as text tool calls under the chat template."""

    def __init__(self, cfg):
        self.cfg = cfg
        self.schemas = T.tool_schemas(cfg.tools)

    def prompt_ids(self, tok, ep: KernelEpisode) -> list[int]:
        ep.messages = initial_messages(ep.problem, types.SimpleNamespace(backend=self.cfg.backend,
                                                                          skill_in_prompt=self.cfg.skill_in_prompt))
        return tok(render_prompt(tok, ep.messages, self.schemas), add_special_tokens=False)["input_ids"]

    def act(self, tok, ep: KernelEpisode, text: str, turn: int) -> str | None:
        ids = iter(range(10**6))
        content, calls, errors = parse_tool_calls(text, id_fn=lambda: f"call_{turn}_{next(ids)}")  # deterministic ids
        msg = {"role": "assistant", "content": content, **({"tool_calls": calls} if calls else {})}
        new: list[dict] = []
        if errors:
            ep.counts["malformed"] += len(errors)
            new.append({"role": "user", "content": BAD_BLOCK.format(errs="; ".join(errors))})
        elif not calls:
            ep.counts["no_tool_call"] += 1
            new.append({"role": "user", "content": NO_CALL.format(tools=", ".join(self.cfg.tools))})
        for c in calls:
            f = c["function"]
            r = T.call_tool(ep.ctx, f["name"], f["arguments"], self.cfg.tools, self.cfg.tool_timeout_s)
            ep.counts["tool_calls"] += 1
            ep.counts["verify_calls"] += int(f["name"] in ("verify", "profile"))
            ep.counts["malformed"] += int(r.kind in ("malformed", "unknown_tool"))
            new.append({"role": "tool", "tool_call_id": c["id"], "name": f["name"],
                        "content": cut_observation(tok, r.observation, self.cfg.obs_max_tokens, ep)})
            ep.finished = ep.finished or r.finish
        if ep.finished:
            return None
        obs = continuation(tok, ep.messages, msg, new, self.schemas)
        ep.messages += [msg, *new]
        return obs

    def final(self, ep: KernelEpisode, env) -> tuple[dict | None, float | None]:
        return final_evaluation(ep.ctx, types.SimpleNamespace(final_eval=self.cfg.kernel_mode))


class GrammarActions:
    """``actions=grammar``: compositions of the kernel grammar, submitted or verified first."""

    def __init__(self, cfg):
        self.cfg = cfg

    @staticmethod
    def check_row(row: dict, where: str) -> None:
        name = row["problem_name"]
        if name not in KG.PROBLEMS or row["problem"] != KG.PROBLEMS[name].source():
            raise ShiftkitError(f"{where}: actions=grammar renders kernels for the grammar's own problems "
                                f"(kernel_grammar.rl_rows); {name!r} is not one of them (or its source differs)")

    def prompt_ids(self, tok, ep: KernelEpisode) -> list[int]:
        return tok(KG.prompt_for(KG.PROBLEMS[ep.row["problem_name"]]), add_special_tokens=False)["input_ids"]

    def act(self, tok, ep: KernelEpisode, text: str, turn: int) -> str | None:
        t = text.strip()
        verify = t.startswith("verify ")
        try:
            comp = KG.parse_composition(t[len("verify "):] if verify else t)
        except ValueError as e:
            ep.counts["malformed"] += 1
            return self._obs(tok, ep, f"error: {e}")
        src = KG.render_solution(KG.PROBLEMS[ep.row["problem_name"]], comp)
        T.call_tool(ep.ctx, "write_file", {"path": "model_new.py", "content": src}, ("write_file",))
        ep.submitted = KG.format_composition(comp, compact=True)
        if not verify:
            ep.finished = True
            return None
        r = T.call_tool(ep.ctx, "verify", {}, ("verify",), self.cfg.tool_timeout_s)
        ep.counts["tool_calls"] += 1
        ep.counts["verify_calls"] += 1
        d = r.data if r.reward is not None else {}
        return self._obs(tok, ep, f"{int(r.reward):+d} {d.get('reason', '')}" if r.reward is not None else r.observation)

    def _obs(self, tok, ep: KernelEpisode, msg: str) -> str:
        return "\n= " + cut_observation(tok, msg.strip(), self.cfg.obs_max_tokens, ep) + "\nkernel:"

    def final(self, ep: KernelEpisode, env) -> tuple[dict | None, float | None]:
        if ep.submitted is None:
            return {"reason": "no composition was written"}, -1.0
        logged: dict = {}
        r = KG.grammar_reward([""], [ep.submitted], [ep.row["problem_name"]], env=env,
                              config=dict(self.cfg.kernel_config) or None, log_extra=lambda k, v: logged.update({k: v}),
                              mode=self.cfg.kernel_mode)[0]
        return logged["kernel"][0] | ({"unscorable": True} if r is None else {}), r


class KernelTask:
    """The task behind ``agent train task=kernels`` (the interface :mod:`shiftkit.agent.rl` calls)."""

    def __init__(self, cfg):
        from shiftkit.kernels import EvalConfig
        from shiftkit.kernels.envclient import LocalKernelEnv, make_env

        self.cfg = cfg
        self._dir = Path(tempfile.mkdtemp(prefix="shiftkit-kernel-task-"))
        self._problems: dict[str, object] = {}
        self.rows = self._load(cfg.data, "data")
        self.eval_rows = self._load(cfg.eval_data, "eval_data") if cfg.eval_data else []
        self.actions = GrammarActions(cfg) if cfg.actions == "grammar" else ToolActions(cfg)
        if cfg.actions == "grammar":
            for r in self.rows + self.eval_rows:
                GrammarActions.check_row(r, "agent train")
        self.eval_config = EvalConfig(backend=cfg.backend, **dict(cfg.kernel_config))
        self.env = make_env(cfg.kernel_env_url, cfg.kernel_env_token, slots=cfg.kernel_slots)
        self.parallel = 1 if isinstance(self.env, LocalKernelEnv) and self.env.pool is None else 4

    def _load(self, source: str, key: str) -> list[dict]:
        from shiftkit.kernels import load_problem
        from shiftkit.kernels.reward_fn import load_problem_rows

        rows = load_problem_rows(source)
        if not rows:
            raise ShiftkitError(f"agent train: {key}={source} has no problem rows")
        for r in rows:
            key_ = f"{r['problem_name']}:{hashlib.sha256(r['problem'].encode()).hexdigest()[:12]}"
            if key_ not in self._problems:
                d = self._dir / key_.replace(":", "_")
                d.mkdir(parents=True, exist_ok=True)
                (d / f"{r['problem_name']}.py").write_text(r["problem"])
                self._problems[key_] = load_problem(d / f"{r['problem_name']}.py")
            r["_key"] = key_
        return rows

    def policy(self, d):
        return load_model_and_tokenizer(self.cfg.model)

    def draw(self, seed: int, step: int, n: int, split: str = "train") -> list[dict]:
        """``n`` rows: shuffled passes over the rows (every row once per pass), a function of (seed, step, split)."""
        rows = self.eval_rows if split == "eval" else self.rows
        rng = random.Random(f"kernels:{split}:{seed}:{step}")
        order: list[int] = []
        while len(order) < n:
            order += rng.sample(range(len(rows)), len(rows))
        return [rows[i] for i in order[:n]]

    def rollouts(self, model, tok, rows: list[dict], seeds: list[int] | None, sampler=None, logps: list | None = None):
        cfg = self.cfg
        eps = []
        try:
            for r in rows:
                p = self._problems[r["_key"]]
                ws = Workspace.create(p.source, skill_text(cfg.backend))
                eps.append(KernelEpisode(r, p, T.ToolContext(ws, p, self.eval_config, env=self.env)))
            prompts = [self.actions.prompt_ids(tok, ep) for ep in eps]

            def act(idx: list[int], texts: list[str], turn: int) -> list[str | None]:
                for i, t in zip(idx, texts):
                    eps[i].turns.append(t)
                    eps[i].counts["turns"] += 1
                obs = self._map(lambda a: self.actions.act(tok, eps[a[0]], a[1], turn), list(zip(idx, texts)))
                for i, o in zip(idx, obs):
                    if o is not None:
                        eps[i].observations.append(o)
                return obs

            out = multi_turn(model, tok, prompts, act, max_turns=cfg.max_turns, max_new=cfg.max_new_tokens,
                             temperature=cfg.temperature, seeds=seeds, sampler=sampler, logps=logps)
            for ep, (final, r) in zip(eps, self._map(lambda ep: self.actions.final(ep, self.env), eps)):
                ep.final, ep.reward = final, r
        finally:
            for ep in eps:
                ep.ctx.workspace.close()
        return eps, out

    def _map(self, fn, xs: list) -> list:
        if self.parallel <= 1 or len(xs) <= 1:
            return [fn(x) for x in xs]
        with ThreadPoolExecutor(min(self.parallel, len(xs))) as ex:
            return list(ex.map(fn, xs))

    def evaluate(self, model, tok) -> dict:
        """``eval_n`` held-out episodes (cycling over the ``eval_data`` rows), sampled at the training
        temperature with fixed seeds: mean reward and the fraction of each outcome."""
        rows = [self.eval_rows[i % len(self.eval_rows)] for i in range(self.cfg.eval_n)]
        eps, _ = self.rollouts(model, tok, rows, [self.cfg.seed * 7919 + 500_000 + i for i in range(len(rows))])
        return outcome_stats(eps)

    def stats(self, eps: list[KernelEpisode]) -> dict:
        s = outcome_stats(eps)
        return {k: v for k, v in s.items() if k not in ("reward", "n")}

    def sample_rows(self, step: int, eps: list[KernelEpisode], n: int) -> list[dict]:
        return [{"step": step + 1, "problem_name": ep.row["problem_name"], "turns": ep.turns, "observations": ep.observations,
                 "reward": ep.reward, "final": ep.final, "counts": ep.counts} for ep in eps[:n]]

    def close(self) -> None:
        self.env.close()
        shutil.rmtree(self._dir, ignore_errors=True)


def outcome_stats(eps: list[KernelEpisode]) -> dict:
    """Mean reward over the scorable episodes, the fraction of each outcome, and the episodes' behaviour."""
    ok = [e.reward for e in eps if e.reward is not None]
    n = max(1, len(eps))
    out = {"n": len(eps), "reward": sum(ok) / len(ok) if ok else float("nan"), "unscorable": (len(eps) - len(ok)) / n}
    for lv in LEVELS:
        out[f"frac_{int(lv):+d}"] = sum(r == lv for r in ok) / max(1, len(ok))
    for k in ("turns", "tool_calls", "verify_calls", "malformed", "obs_truncated"):
        out[k] = sum(e.counts[k] for e in eps) / n
    out["finished"] = sum(e.finished for e in eps) / n
    return out
