"""The kernel reward trains a policy, on this CPU: ``shiftkit experiment agent-kernels``.

A tiny policy (Qwen3, 0.23M, character tokenizer) composes kernels from the kernel grammar
(:mod:`shiftkit.agent.kernel_grammar`); the real kernel environment compiles, verifies and profiles the
rendered C++ and gives the milestone reward {-1, 1, 2, 3}. Per seed, two pipelines from the same kind of
start (behaviour cloning of uniformly random valid compositions), on the same train problems, judged on
the same held-out problems with the same reward:

The behaviour-cloning data (uniformly random valid compositions or a random explorer's episodes; no
reward in it) covers the held-out prompts too, so the policy speaks the format there before RL; the
reward only ever comes from the train problems.

* **single-turn** (the paper's stage 1): SFT on ``kernel_grammar`` rows (compact format), then
  ``shiftkit rl`` (:func:`shiftkit.rl.run_grpo`) with ``reward=shiftkit.agent.kernel_grammar:grammar_reward``;
* **multi-turn** (stages 2-4): behaviour cloning of a random explorer's episodes in the agent's action
  language (``verify <composition>`` runs the environment's verify tool, a bare composition submits;
  :mod:`shiftkit.agent.kernel_task`), rejection fine-tuning on the clone's own positive episodes, then
  ``shiftkit agent train task=kernels actions=grammar`` (:func:`shiftkit.agent.rl.run_agentic_rl`):
  value pretraining of the critic and PPO (GAE, asymmetric clip).

Held-out evaluation: ``eval_samples`` sampled answers (single-turn) or episodes (multi-turn) per
held-out problem at temperature 1 with fixed seeds, before and after; the mean reward and the fraction
of each outcome. All runs share one environment, ``kernels serve cache_timing=true`` (started here
unless ``kernel_env_url`` is given), so each (problem, composition) is profiled once and its verdict
reused: the reward of a composition is one noisy measurement, fixed for the whole experiment. The
verdicts are kept in ``out/verdicts.jsonl`` (``kernels serve cache_file=``) and every stage is cached in
``out``, so rerunning continues where it stopped, with the same verdicts while the harness is unchanged.
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import torch

from shiftkit.agent import kernel_grammar as KG
from shiftkit.errors import ShiftkitError
from shiftkit.io import atomic_write_json, read_jsonl

TRAIN = ["g_ew_clamp_1024x1024", "g_ew_leaky_768x1024", "g_red_sumsq_1024x1024"]
HELDOUT = ["g_ew_relu6_1024x768", "g_red_sumrelu_1024x768"]


@dataclasses.dataclass
class AgentKernelsConfig:
    out: str = "runs/agent_kernels"
    seeds: list[int] = dataclasses.field(default_factory=lambda: [0, 1, 2])
    train_problems: list[str] = dataclasses.field(default_factory=lambda: list(TRAIN))
    heldout_problems: list[str] = dataclasses.field(default_factory=lambda: list(HELDOUT))
    kernel_env_url: str = ""  # a running `kernels serve cache_timing=true` ("" = start one here for the experiment)
    kernel_env_token: str = ""
    env_slots: int = 2  # the service started here: evaluation slots
    sft_rows: int = 2000  # behaviour-cloning rows (random valid compositions; episodes for multi-turn: demo_episodes)
    sft_steps: int = 600
    sft_lr: float = 3e-3
    demo_episodes: int = 192  # multi-turn: the random explorer's episodes on the train problems (real tool observations)
    rft_episodes: int = 96  # multi-turn: the clone's own episodes sampled for rejection fine-tuning
    rft_steps: int = 100
    st_steps: int = 40  # single-turn GRPO steps
    st_lr: float = 3e-4  # 1e-3 collapsed a tuning run (held-out answers degenerated to garbage by step 30)
    st_kl_coef: float = 0.1  # k3 KL of the single-turn policy to its SFT start (0 broke the format in the small runs: docs/agent.md)
    mt_steps: int = 40  # multi-turn PPO steps
    mt_lr: float = 3e-4
    group_size: int = 8
    max_turns: int = 3
    value_pretrain_steps: int = 20
    eval_samples: int = 16  # per held-out problem
    progress: bool = True

    def validate(self) -> None:
        bad = [n for n in self.train_problems + self.heldout_problems if n not in KG.PROBLEMS]
        if bad:
            raise ShiftkitError(f"agent-kernels: unknown grammar problem(s) {', '.join(bad)}; known: {', '.join(KG.PROBLEMS)}")
        if set(self.train_problems) & set(self.heldout_problems):
            raise ShiftkitError("agent-kernels: train_problems and heldout_problems overlap")
        if not self.seeds or not self.train_problems or not self.heldout_problems:
            raise ShiftkitError("agent-kernels: needs seeds, train_problems and heldout_problems")


# ----------------------------------------------------------------------------- the shared environment

class Service:
    """``kernel_env_url``, or a ``shiftkit kernels serve cache_timing=true`` started (and stopped) here."""

    def __init__(self, cfg: AgentKernelsConfig, out: Path):
        self.proc = None
        self.url = cfg.kernel_env_url
        if self.url:
            return
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        log = open(out / "serve.log", "ab")  # noqa: SIM115 - the child's stderr for the experiment's life
        self.proc = subprocess.Popen([sys.executable, "-m", "shiftkit", "kernels", "serve", f"port={port}",
                                      f"slots={cfg.env_slots}", "cache_timing=true", f"cache_file={out / 'verdicts.jsonl'}",
                                      "quiet=true", "deadline_s=1800"],
                                     stdout=log, stderr=log, env={**os.environ, "OMP_NUM_THREADS": "1"})
        self.url = f"http://127.0.0.1:{port}"
        for _ in range(120):
            try:
                urllib.request.urlopen(self.url + "/health", timeout=2).read()
                return
            except OSError:
                if self.proc.poll() is not None:
                    raise ShiftkitError(f"agent-kernels: kernels serve exited ({self.proc.returncode}); see {out}/serve.log")
                time.sleep(1)
        raise ShiftkitError(f"agent-kernels: kernels serve did not answer on {self.url}; see {out}/serve.log")

    def health(self) -> dict:
        return json.loads(urllib.request.urlopen(self.url + "/health", timeout=10).read()).get("pool", {})

    def close(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(timeout=60)


# ----------------------------------------------------------------------------- data and behaviour cloning

def write_rows(path: Path, names: list[str]) -> str:
    rows = [r for r in KG.rl_rows("train") + KG.rl_rows("heldout") if r["problem_name"] in names]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def single_turn_rows(tok, names: list[str], n: int, seed: int) -> list[tuple[list[int], list[int]]]:
    """``kernel_grammar``-style SFT rows (a random valid composition per row, compact) as ``(ids, gen)``."""
    rng = random.Random(f"agent-kernels-sft:{seed}")
    out = []
    for _ in range(n):
        p = KG.PROBLEMS[rng.choice(names)]
        prompt = tok(KG.prompt_for(p), add_special_tokens=False)["input_ids"]
        comp = tok(" " + KG.format_composition(KG.random_composition(rng), compact=True), add_special_tokens=False)["input_ids"]
        out.append((prompt + comp + [tok.eos_token_id], [0] * len(prompt) + [1] * (len(comp) + 1)))
    return out


def clone(model, tok, rows: list, steps: int, lr: float, seed: int, batch: int = 32):
    """Assistant-token NLL (:func:`shiftkit.agent.batches.masked_sft_step`) on ``rows``, shuffled by ``seed``."""
    from shiftkit import loopkit as kit
    from shiftkit.agent.batches import masked_sft_step

    torch.manual_seed(seed)
    opt = kit.make_optimizer(model, lr, 0.0)
    rng = random.Random(f"clone:{seed}")
    model.train()
    loss = float("nan")
    for s in range(steps):
        kit.set_lr(opt, kit.lr_at(s, lr, min(20, steps // 10), steps, "linear"))
        loss = masked_sft_step(model, opt, [rows[rng.randrange(len(rows))] for _ in range(batch)], tok.pad_token_id)
    return loss


class Explorer:
    """A random explorer in the agent's action language, as a sampler (the call of
    :func:`shiftkit.sampling.sample` on token contexts): first turn ``verify X`` or ``X`` (submit), after a
    passing verify it submits X, after a failing one it verifies or submits a new random composition."""

    def __init__(self, max_turns: int, p_verify: float = 0.5):
        self.max_turns, self.p_verify = max_turns, p_verify

    def action(self, context: str, seed: int) -> str:
        rng = random.Random(seed)
        turn = context.count("\nkernel:") - 1
        rand = KG.format_composition(KG.random_composition(rng), compact=True)
        last = context.rsplit("\n= ", 1)[-1] if turn > 0 else ""
        if last.startswith("+1"):
            return " " + context.rsplit("verify ", 1)[-1].split("\n")[0].strip()
        if turn < self.max_turns - 1 and rng.random() < self.p_verify:
            return " verify " + rand
        return " " + rand

    def __call__(self, tok, prompt_ids, max_new_tokens, temperature, greedy=False, row_seeds=None, **kw):
        from shiftkit.prompts import left_pad, right_pad
        from shiftkit.sampling import Rollouts

        seeds = row_seeds or list(range(len(prompt_ids)))
        texts = [self.action(tok.decode(p, skip_special_tokens=True), s) for p, s in zip(prompt_ids, seeds)]
        comp = [tok(t, add_special_tokens=False)["input_ids"] + [tok.eos_token_id] for t in texts]
        p_BP, pm_BP = left_pad(prompt_ids, tok.pad_token_id)
        c_BT, cm_BT = right_pad(comp, tok.pad_token_id)
        return Rollouts(p_BP, pm_BP, c_BT, cm_BT, torch.zeros(c_BT.shape), torch.ones(len(comp), dtype=torch.bool), texts)


# ----------------------------------------------------------------------------- held-out evaluation

def single_turn_eval(model, tok, names: list[str], k: int, env, seed: int = 0) -> dict:
    """``k`` sampled answers per problem (temperature 1, fixed seeds), judged by ``grammar_reward``."""
    from shiftkit.sampling import sample

    model.eval()
    prompts = [KG.prompt_for(KG.PROBLEMS[n]) for n in names for _ in range(k)]
    seeds = [seed * 7919 + 500_000 + i for i in range(len(prompts))]
    with torch.no_grad():
        roll = sample(model, tok, prompts, max_new_tokens=32, temperature=1.0, row_seeds=seeds)
    model.train()
    pn = [n for n in names for _ in range(k)]
    logged: dict = {}
    r = KG.grammar_reward(prompts, roll.texts, pn, env=env, log_extra=lambda key, v: logged.update({key: v}))
    return outcomes(r) | {"answers": [{"problem": p, "answer": t, "reward": x} for p, t, x in zip(pn, roll.texts, r)]}


def outcomes(rewards: list) -> dict:
    ok = [x for x in rewards if x is not None]
    out = {"n": len(rewards), "reward": sum(ok) / len(ok) if ok else float("nan"),
           "unscorable": (len(rewards) - len(ok)) / max(1, len(rewards))}
    for lv in KG_LEVELS:
        out[f"frac_{int(lv):+d}"] = sum(x == lv for x in ok) / max(1, len(ok))
    return out


KG_LEVELS = (-1.0, 1.0, 2.0, 3.0)


# ----------------------------------------------------------------------------- the two pipelines

def _base(seed: int):
    from shiftkit.models import WEAK_SPEC, make_char_tokenizer, make_tiny_model

    torch.manual_seed(1000 + seed)
    return make_tiny_model(WEAK_SPEC, seed=1000 + seed), make_char_tokenizer()


def _cached(path: Path, fn):
    if path.is_file():
        return json.loads(path.read_text())
    r = fn()
    atomic_write_json(path, r)
    return r


def single_turn(cfg: AgentKernelsConfig, seed: int, out: Path, env, url: str, data: str) -> dict:
    from shiftkit.models import load_model_and_tokenizer, save_model
    from shiftkit.rl import GRPOConfig, run_grpo

    sft = out / "sft"
    if not (sft / "config.json").is_file():
        model, tok = _base(seed)
        names = cfg.train_problems + cfg.heldout_problems  # the format on every prompt; no reward in it
        loss = clone(model, tok, single_turn_rows(tok, names, cfg.sft_rows, seed), cfg.sft_steps, cfg.sft_lr, seed)
        save_model(model, tok, sft, extra_files={"clone.json": json.dumps({"final_loss": loss})})
    before = _cached(out / "eval_before.json", lambda: single_turn_eval(*load_model_and_tokenizer(sft), cfg.heldout_problems,
                                                                         cfg.eval_samples, env, seed))
    rl = run_grpo(GRPOConfig(model=str(sft), out=str(out / "rl"), data=data, reward=["shiftkit.agent.kernel_grammar:grammar_reward"],
                             kernel_env_url=url, kernel_env_token=cfg.kernel_env_token, steps=cfg.st_steps,
                             prompts_per_step=len(cfg.train_problems), group_size=cfg.group_size, max_new_tokens=32,
                             lr=cfg.st_lr, kl_coef=cfg.st_kl_coef, eval_every=0, save_every=5, samples_every=5, seed=seed, threads=1,
                             progress=cfg.progress))
    after = _cached(out / "eval_after.json", lambda: single_turn_eval(*load_model_and_tokenizer(rl["out"]), cfg.heldout_problems,
                                                                       cfg.eval_samples, env, seed))
    return {"before": before, "after": after, "train_curve": [r["reward"] for r in read_jsonl(out / "rl" / "metrics.jsonl")
                                                                 if "reward" in r]}


def _agent_cfg(cfg: AgentKernelsConfig, seed: int, url: str, model: str, data: str, eval_data: str, out: str, **kw):
    from shiftkit.agent.rl import AgenticRLConfig

    return AgenticRLConfig(task="kernels", actions="grammar", model=model, data=data, eval_data=eval_data, out=out,
                           kernel_env_url=url, kernel_env_token=cfg.kernel_env_token, seed=seed, max_turns=cfg.max_turns,
                           max_new_tokens=32, obs_max_tokens=64, prompts_per_step=len(cfg.train_problems),
                           group_size=cfg.group_size, eval_n=cfg.eval_samples * len(cfg.heldout_problems),
                           progress=cfg.progress, **kw)


def multi_turn(cfg: AgentKernelsConfig, seed: int, out: Path, url: str, data: str, eval_data: str) -> dict:
    from shiftkit.agent.kernel_task import KernelTask, outcome_stats
    from shiftkit.agent.rl import run_agentic_rl
    from shiftkit.models import load_model_and_tokenizer, save_model

    bc, rft = out / "bc", out / "rft"
    probe = _agent_cfg(cfg, seed, url, str(bc), data, eval_data, str(out / "ppo"))
    task = KernelTask(probe)
    try:
        if not (bc / "config.json").is_file():
            model, tok = _base(seed)
            rng = random.Random(f"demos:{seed}")  # every prompt, train and held-out: the format, not the reward
            rows = [rng.choice(task.rows + task.eval_rows) for _ in range(cfg.demo_episodes)]
            eps, demo = task.rollouts(model, tok, rows, [seed * 1_000_003 + i for i in range(len(rows))],
                                      sampler=Explorer(cfg.max_turns))
            loss = clone(model, tok, demo, cfg.sft_steps, cfg.sft_lr, seed)
            save_model(model, tok, bc, extra_files={"clone.json": json.dumps({"final_loss": loss, "demos": outcome_stats(eps)})})
        before = _cached(out / "eval_bc.json", lambda: task.evaluate(*load_model_and_tokenizer(bc)))
        if not (rft / "config.json").is_file():
            model, tok = load_model_and_tokenizer(bc)
            rows = task.draw(seed, 1, cfg.rft_episodes, "rft")
            eps, sampled = task.rollouts(model, tok, rows, [seed * 1_000_003 + 77_777 + i for i in range(len(rows))])
            kept = [r for e, r in zip(eps, sampled) if e.reward is not None and e.reward > 0 and e.counts["malformed"] == 0
                    and e.finished]
            if not kept:
                raise ShiftkitError(f"agent-kernels seed {seed}: no positive episode to fine-tune on (RFT)")
            loss = clone(model, tok, kept, cfg.rft_steps, cfg.sft_lr / 3, seed)
            save_model(model, tok, rft, extra_files={"rft.json": json.dumps({"final_loss": loss, "kept": len(kept),
                                                                              "sampled": len(eps), "sampled_stats": outcome_stats(eps)})})
        after_rft = _cached(out / "eval_rft.json", lambda: task.evaluate(*load_model_and_tokenizer(rft)))
    finally:
        task.close()
    ppo = run_agentic_rl(_agent_cfg(cfg, seed, url, str(rft), data, eval_data, str(out / "ppo"), algo="ppo",
                                    steps=cfg.mt_steps, lr=cfg.mt_lr, value_pretrain_steps=cfg.value_pretrain_steps,
                                    value_pretrain_batches=2, eval_every=cfg.mt_steps, save_every=5))
    return {"before": before, "after_rft": after_rft, "after": ppo["final_eval"], "value_pretrain": ppo.get("value_pretrain"),
            "rft": json.loads((rft / "rft.json").read_text()),
            "train_curve": [r["reward"] for r in read_jsonl(out / "ppo" / "metrics.jsonl") if "loss" in r]}


# ----------------------------------------------------------------------------- the experiment

def _strip(d: dict) -> dict:
    return {k: v for k, v in d.items() if k not in ("answers",)}


def _summary(per_seed: dict, key: str) -> dict:
    import statistics

    vals = [per_seed[s][key]["reward"] for s in per_seed]
    out = {"per_seed": vals, "mean": statistics.mean(vals), "std": statistics.stdev(vals) if len(vals) > 1 else 0.0}
    for lv in KG_LEVELS:
        f = f"frac_{int(lv):+d}"
        out[f] = statistics.mean(per_seed[s][key][f] for s in per_seed)
    return out


def learning_verdict(before: list[float], after: list[float]) -> dict:
    """The rule for "learning shown" (docs/agent.md): every seed's held-out reward goes up and the mean paired
    change exceeds twice the sample sd of the changes; one seed shows nothing."""
    import statistics

    ch = [a - b for b, a in zip(before, after)]
    sd = statistics.stdev(ch) if len(ch) > 1 else float("nan")
    shown = len(ch) > 1 and all(c > 0 for c in ch) and statistics.mean(ch) > 2 * sd
    return {"changes": ch, "mean_change": statistics.mean(ch) if ch else float("nan"), "sd_change": sd,
            "verdict": "shown" if shown else "not shown"}


def oracle(env, names: list[str]) -> dict:
    """Every composition's reward on the held-out problems (the cached verdicts): what the best policy could get."""
    comps = [KG.format_composition(c, compact=True) for c in KG.all_compositions()]
    table = {}
    for n in names:
        r = KG.grammar_reward([""] * len(comps), comps, [n] * len(comps), env=env)
        table[n] = dict(zip(comps, r))
    per = {n: max(x for x in t.values() if x is not None) for n, t in table.items()}
    uniform = [x for t in table.values() for x in t.values() if x is not None]
    return {"best_per_problem": per, "best_mean": sum(per.values()) / len(per), "uniform_random_mean": sum(uniform) / len(uniform),
            "uniform_random": outcomes(uniform), "table": table}


def plot(res: dict, png: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
    for s, r in res["per_seed"].items():
        axes[0].plot(r["single_turn"]["train_curve"], color="tab:blue", alpha=0.7, label=f"single-turn GRPO seed {s}")
        axes[0].plot(r["multi_turn"]["train_curve"], color="tab:orange", alpha=0.7, label=f"multi-turn PPO seed {s}")
    axes[0].set(title="training reward (train problems)", xlabel="step", ylabel="mean milestone reward", ylim=(-1.05, 3.05))
    axes[0].legend(fontsize=6)
    stages = [("single_turn", "before", "ST SFT"), ("single_turn", "after", "ST +GRPO"), ("multi_turn", "before", "MT BC"),
              ("multi_turn", "after_rft", "MT +RFT"), ("multi_turn", "after", "MT +VP+PPO")]
    for j, (pipe, key, label) in enumerate(stages):
        ys = [r[pipe][key]["reward"] for r in res["per_seed"].values()]
        axes[1].scatter([j] * len(ys), ys, color="k", s=14)
        axes[1].bar(j, sum(ys) / len(ys), color="tab:blue" if pipe == "single_turn" else "tab:orange", alpha=0.6)
    axes[1].axhline(res["oracle"]["best_mean"], ls="--", color="tab:green", label="best composition")
    axes[1].axhline(res["oracle"]["uniform_random_mean"], ls=":", color="gray", label="uniform random")
    axes[1].set_xticks(range(len(stages)), [s[2] for s in stages], fontsize=8)
    axes[1].set(title="held-out mean reward (dots: seeds)", ylim=(-1.05, 3.05))
    axes[1].legend(fontsize=7)
    fig.suptitle("kernel grammar on the real kernel environment: a 0.23M policy, single-turn vs multi-turn")
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    plt.close(fig)


def command(cfg: AgentKernelsConfig) -> str:
    """The command line that reruns ``cfg`` (the keys that differ from the defaults)."""
    d0 = dataclasses.asdict(AgentKernelsConfig())
    keys = [f"{k}={json.dumps(v, separators=(',', ':')) if isinstance(v, list) else v}"
            for k, v in dataclasses.asdict(cfg).items() if v != d0[k] and k != "kernel_env_token"]
    return " ".join(["shiftkit experiment agent-kernels", *keys])


def run(cfg: AgentKernelsConfig) -> dict:
    from shiftkit.kernels.envclient import RemoteKernelEnv

    cfg.validate()
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    svc = Service(cfg, out)
    try:
        env = RemoteKernelEnv(svc.url, cfg.kernel_env_token)
        data, eval_data = write_rows(out / "train.jsonl", cfg.train_problems), write_rows(out / "heldout.jsonl", cfg.heldout_problems)
        per_seed = {}
        for seed in cfg.seeds:
            d = out / f"seed{seed}"
            st = single_turn(cfg, seed, d / "single_turn", env, svc.url, data)
            mt = multi_turn(cfg, seed, d / "multi_turn", svc.url, data, eval_data)
            per_seed[str(seed)] = {"single_turn": st, "multi_turn": mt}
            print(f"seed {seed}: single-turn {st['before']['reward']:+.2f} -> {st['after']['reward']:+.2f}; multi-turn "
                  f"{mt['before']['reward']:+.2f} -> RFT {mt['after_rft']['reward']:+.2f} -> PPO {mt['after']['reward']:+.2f}",
                  file=sys.stderr, flush=True)
        commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
        res = {"command": command(cfg), "commit": commit, "seeds": list(cfg.seeds), "problems": {"train": cfg.train_problems, "heldout": cfg.heldout_problems},
               "oracle": oracle(env, cfg.heldout_problems), "per_seed": per_seed, "config": dataclasses.asdict(cfg),
               "env": {"service": svc.url if cfg.kernel_env_url else "started here", "pool": svc.health(),
                       "eval_config": KG.TASK_EVAL_CONFIG},
               "seconds": round(time.time() - t0, 1)}
        res["single_turn"] = {"reward_before": _summary({s: r["single_turn"] for s, r in per_seed.items()}, "before"),
                              "reward_after": _summary({s: r["single_turn"] for s, r in per_seed.items()}, "after")}
        res["multi_turn"] = {"reward_before": _summary({s: r["multi_turn"] for s, r in per_seed.items()}, "before"),
                             "reward_after_rft": _summary({s: r["multi_turn"] for s, r in per_seed.items()}, "after_rft"),
                             "reward_after": _summary({s: r["multi_turn"] for s, r in per_seed.items()}, "after")}
        for r in per_seed.values():
            for k in ("before", "after"):
                r["single_turn"][k] = _strip(r["single_turn"][k])
        plot(res, out / "agent_kernel_rl.png")
        atomic_write_json(out / "results.json", res)
        return res
    finally:
        svc.close()


def run_experiment(config_path: str | None, overrides: list[str] | None) -> dict:
    from shiftkit.config import load_config

    return run(load_config(AgentKernelsConfig, config_path, overrides))
