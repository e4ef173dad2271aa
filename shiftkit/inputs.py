"""The user's data, prompt rendering and reward, loaded and checked before a run writes anything.

Every command (``sft``, ``rl``, ``opd``, ``eval``) calls :func:`prompt_inputs` (or :func:`sft_inputs`)
after its model and tokenizer load and *before* its run directory is created, so a missing column,
an empty dataset, an uncached hub dataset, a reward import path that does not resolve, a reward
that raises, or a chat template that is missing when asked for stops the command with one line and
leaves nothing behind.

The data source is ``data=`` (:mod:`shiftkit.data`); ``tasks=add,mul`` is kept as shorthand for
``data=arith:add,mul`` (giving both is an error). ``reward=`` empty means: the arithmetic tasks'
own checker on ``arith:`` data (what the toy world always used, :class:`shiftkit.rewards.TaskRewards`),
``math`` on any other data; a run with :class:`shiftkit.rewards.KernelEnvKeys` binds ``reward=kernel`` to its
environment here (:func:`shiftkit.rewards.configure_kernel_env`). The keys are the commands' shared groups (:class:`shiftkit.data.DataKeys`,
:class:`shiftkit.prompts.PromptKeys`, :class:`shiftkit.rewards.RewardKeys`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from shiftkit.data import DataArgs, is_arith, load_eval, load_prompts, load_sft, parse_arith
from shiftkit.errors import ShiftkitError
from shiftkit.prompts import PromptRenderer
from shiftkit.rewards import KernelEnvKeys, Rewards, TaskRewards, configure_kernel_env, reads_kernel_env


def data_spec(cfg: Any, command: str) -> str:
    """``cfg.data``, or ``arith:<tasks>`` from the ``tasks`` shorthand."""
    tasks = list(getattr(cfg, "tasks", []) or [])
    data = getattr(cfg, "data", "")
    if tasks and data:
        raise ShiftkitError(f"{command}: give data=... or tasks=... (shorthand for data=arith:...), not both")
    if tasks:
        return "arith:" + ",".join(tasks)
    if not data:
        raise ShiftkitError(f"{command} needs data=<file, directory, cached hub id, or arith:add,mul>")
    return data


def data_args(cfg: Any, command: str, arith_n: int = 100):
    args = DataArgs.from_config(cfg)
    return dataclasses.replace(args, data=data_spec(cfg, command), arith_n=arith_n)


def load_rewards(cfg: Any, arith: bool):
    """The run's rewards: ``cfg.reward`` (names or import paths) or the default for the data."""
    specs = list(getattr(cfg, "reward", []) or [])
    weights = list(getattr(cfg, "reward_weights", []) or [])
    if not specs:
        if weights:
            raise ShiftkitError("reward_weights given without reward=...")
        if arith:
            return TaskRewards(parse_arith(data_spec(cfg, "")))
        specs = ["math"]
    if isinstance(cfg, KernelEnvKeys) and reads_kernel_env(specs):  # reward=kernel: bind its environment first
        configure_kernel_env(cfg)
    return Rewards(specs, weights)


def dry_run_rewards(rewards, examples: list) -> None:
    """Call every reward once on the first rows (empty completions), so a reward that raises or returns
    the wrong number of values fails before the run starts."""
    ex = list(examples)[:2]
    if ex:
        rewards.score(ex, [""] * len(ex))


@dataclasses.dataclass
class Inputs:
    ds: Any  # PromptDataset | ArithSource | SFTDataset
    renderer: Any  # PromptRenderer
    rewards: Any  # Rewards | TaskRewards | None
    arith: bool
    eval_items: list  # held-out Examples for periodic evaluation ([] = none)

    def prompts_for(self, examples: list) -> list:
        """What the sampler is given: the rendered ids under a chat template, else the rendered text
        (which tokenizes to the same ids)."""
        return self.prompt_ids(examples) if self.renderer.chat else self.prompt_texts(examples)

    def prompt_ids(self, examples: list) -> list[list[int]]:
        return [self.renderer.ids(e.prompt) for e in examples]

    def prompt_texts(self, examples: list) -> list[str]:
        return [self.renderer.text(e.prompt) for e in examples]


def renderer_for(cfg: Any, tok, where: str):
    return PromptRenderer.from_keys(tok, cfg, where)


def prompt_inputs(cfg: Any, tok, command: str, *, need_reward: bool = True, eval_n: int = 100,
                  for_eval: bool = False, model_path: str = "", want_eval: bool = True) -> Inputs:
    """Prompts (+ held-out rows), renderer and rewards of a rl / opd / eval run, all checked."""
    args = data_args(cfg, command, eval_n)
    arith = is_arith(args.data)
    rewards = load_rewards(cfg, arith) if need_reward else None
    need = rewards.need_answer() if rewards is not None else ""
    if for_eval:
        ds = load_eval(args, seed=cfg.seed, need_answer=need)
    else:
        ds = load_prompts(args, seed=cfg.seed, need_answer=need)
    if rewards is not None:
        rewards.check_columns(ds.columns, ds.name)
    r = renderer_for(cfg, tok, model_path)
    preview = list(ds.items) if hasattr(ds, "items") else ds.draw(cfg.seed, 0, 8)
    r.check(preview)
    if rewards is not None:
        dry_run_rewards(rewards, preview)
    eval_items: list = []
    if not for_eval and want_eval:
        if arith:
            eval_items = list(ds.held_out(eval_n).items)
        elif getattr(ds, "eval", None) is not None:
            eval_items = list(ds.eval.items)
    return Inputs(ds, r, rewards, arith, eval_items)


def sft_inputs(cfg: Any, tok, model_path: str = "") -> Inputs:
    args = data_args(cfg, "sft", getattr(cfg, "eval_n", 100))
    ds = load_sft(args, seed=cfg.seed, error_rate=cfg.error_rate)
    r = renderer_for(cfg, tok, model_path)
    arith = is_arith(args.data)
    preview = ds.draw_sft(cfg.seed, 0, 8) if arith else list(ds.items)
    r.check(preview, max_length=getattr(cfg, "max_length", 0))
    eval_items = []
    if arith and getattr(cfg, "eval_every", 0):
        eval_items = list(ds.held_out(cfg.eval_n).items)
    return Inputs(ds, r, None, arith, eval_items)
