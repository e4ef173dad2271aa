"""Reward functions with TRL's signature, built in or imported by path, several with weights.

A reward function is called as TRL's ``GRPOTrainer`` calls one::

    fn(prompts=[...], completions=[...], completion_ids=[...], trainer_state=..., log_extra=...,
       log_metric=..., **columns) -> list[float | None]

``prompts`` and ``completions`` are strings, or for conversational data (a prompt that is a list
of chat messages) the prompt's messages and ``[{"role": "assistant", "content": text}]``. Every
dataset column except the prompt reaches the function as a keyword argument holding one value per
completion (the answer column as ``answer``). ``None`` means "not applicable to this sample": that
reward is left out of the sample's weighted sum, and a sample for which every reward returns
``None`` is unscorable (its total is NaN; TRL gives it advantage 0). A TRL user's reward function
works unchanged.

Built in (the registry; an unknown name is an error):

* ``math``: the final answer (``\\boxed{}``, ``Answer:``, ``####``) equals ``answer``
  symbolically (:mod:`shiftkit.tasks.math_answer`, math-verify);
* ``exact``: the stripped completion equals the stripped ``answer``;
* ``arith``: the arithmetic tasks' exact checker (the number after the trace's last ``:``);
* ``format``: the completion states its answer explicitly (``Answer:``, ``\\boxed{}`` or ``####``);
* ``kernel``: the kernel environment's milestone reward {-1, 1, 2, 3} of the completion's solution
  against the row's ``problem`` source (:func:`shiftkit.kernels.reward_fn.kernel_reward`, registered by
  its import path, so the core never imports the environment). The environment is chosen by the
  :class:`KernelEnvKeys` (a ``shiftkit kernels serve`` service or this process);
  :func:`configure_kernel_env` binds it before a run starts.

``reward=pkg.module:function`` (or ``path/to/file.py:function``) imports a user function. Several
rewards combine as ``reward=math,format reward_weights=1.0,0.1``. A reward that raises, returns a
wrong number of values or a non-number, or an import path that does not resolve, is a one-line
:class:`ShiftkitError` naming the function.
"""

from __future__ import annotations

import asyncio
import dataclasses
import difflib
import importlib
import importlib.util
import inspect
import math
import sys
import types
from pathlib import Path
from typing import Any, Callable

from shiftkit.data import AnswerKey
from shiftkit.errors import ShiftkitError
from shiftkit.tasks import Mixture
from shiftkit.tasks.arith import extract_final_answer
from shiftkit.tasks.math_answer import has_answer_marker
from shiftkit.tasks.math_answer import math_reward as math_check

RESERVED = ("prompts", "completions", "completion_ids", "trainer_state", "log_extra", "log_metric")
_NOT_COLUMNS = {*RESERVED, "prompt", "completion", "kwargs"}


@dataclasses.dataclass
class RewardKeys(AnswerKey):
    """The reward keys of ``rl``, ``opd`` and ``eval`` (and the answer column they read), declared once."""

    reward: list[str] = dataclasses.field(default_factory=list)  # math | exact | arith | format | kernel | pkg.module:fn ([] = math; the task checker on arith data)
    reward_weights: list[float] = dataclasses.field(default_factory=list)  # one weight per reward (default 1.0 each)


KERNEL_CONFIGURE = "shiftkit.kernels.reward_fn:configure"  # binds the ``kernel`` reward's environment
KERNEL_CHECK_JOB = "shiftkit.kernels.pool:make_job"  # validates a request (its mode and config overrides)


@dataclasses.dataclass
class KernelServiceKeys:
    """Where kernels are judged, declared once: a ``shiftkit kernels serve`` service, a local pool of child
    processes, or this process (``agent run``/``bench`` tools; with :class:`KernelEnvKeys`, ``rl
    reward=kernel`` and ``agent train task=kernels``)."""

    kernel_env_url: str = ""  # a `shiftkit kernels serve` service, http://HOST:PORT ("" = the environment in this process)
    kernel_env_token: str = ""  # that service's Bearer token ("" = none)
    kernel_slots: int = 0  # without a service: evaluate on a local pool of this many child processes (0 = in this process)


@dataclasses.dataclass
class KernelEnvKeys(KernelServiceKeys):
    """The environment keys plus what a kernel reward asks of it (``rl reward=kernel``, ``agent train
    task=kernels``), declared once."""

    kernel_mode: str = "profile"  # the reward's evaluation: profile (milestones -1/+1/+2/+3) | verify (-1/+1, no timing)
    kernel_config: dict = dataclasses.field(default_factory=dict)  # EvalConfig overrides sent with each request, e.g. {"timed_calls": 10}

    def check_kernel_keys(self, command: str) -> None:
        if self.kernel_mode not in ("profile", "verify"):
            raise ShiftkitError(f"{command}: kernel_mode must be profile or verify, got {self.kernel_mode!r}")
        if self.kernel_slots < 0:
            raise ShiftkitError(f"{command}: kernel_slots must be >= 0, got {self.kernel_slots}")
        if self.kernel_env_url and not self.kernel_env_url.startswith(("http://", "https://")):
            raise ShiftkitError(f"{command}: kernel_env_url must be http(s)://HOST:PORT, got {self.kernel_env_url!r}")


def kernel_env_rules(uses_env: Callable[[Any], bool], uses_mode: Callable[[Any], bool], when_env: str,
                     when_mode: str) -> dict:
    """The :func:`shiftkit.config.check_dependent` rules of :class:`KernelEnvKeys` for one command: the
    environment keys count only when the run judges kernels, the reward keys only with ``reward=kernel``."""
    return {"kernel_env_url": (uses_env, when_env),
            "kernel_slots": (lambda c: uses_env(c) and not c.kernel_env_url, f"{when_env}, without kernel_env_url"),
            "kernel_env_token": (lambda c: bool(c.kernel_env_url), "with a service (kernel_env_url)"),
            "kernel_mode": (uses_mode, when_mode), "kernel_config": (uses_mode, when_mode)}


def reads_kernel_env(specs: list[str]) -> bool:
    """Whether a run's rewards may judge kernels: ``kernel``, or a user function (which may read the bound
    environment, as ``shiftkit.agent.kernel_grammar:grammar_reward`` does)."""
    return any(s.strip() in BY_PATH or ":" in s for s in specs)


def configure_kernel_env(cfg: KernelEnvKeys) -> Callable:
    """Bind the ``kernel`` reward (and the environment :func:`shiftkit.kernels.reward_fn.bound_env` returns) to
    ``cfg``'s environment, by import path; returns the bound reward (its ``.env`` is the environment)."""
    try:  # a bad kernel_config is a one-line error before the run starts, not a failure at its first step
        _import_path(KERNEL_CHECK_JOB)("class Model: get_inputs", "class ModelNew: pass", cfg.kernel_mode, dict(cfg.kernel_config))
    except ShiftkitError:
        raise
    except Exception as e:  # noqa: BLE001 - the environment's JobError
        raise ShiftkitError(f"kernel_config={cfg.kernel_config!r}: {_first_line(e)}") from None
    configure = _import_path(KERNEL_CONFIGURE)
    return configure(kernel_env_url=cfg.kernel_env_url, token=cfg.kernel_env_token, mode=cfg.kernel_mode,
                     config=dict(cfg.kernel_config), slots=cfg.kernel_slots)


def completion_text(c: Any) -> str:
    """The text of a completion: a string, or the content of TRL's ``[{"role": "assistant", ...}]``."""
    if isinstance(c, str):
        return c
    if isinstance(c, list):
        return "".join(str(m.get("content", "")) for m in c if isinstance(m, dict))
    if isinstance(c, dict):
        return str(c.get("content", ""))
    return str(c)


# --------------------------------------------------------------------------------------------------
# Built-in rewards
# --------------------------------------------------------------------------------------------------

BUILTIN: dict[str, Callable] = {}
# built-in names that live above the core, resolved by import path when asked for (the layering holds)
BY_PATH: dict[str, str] = {"kernel": "shiftkit.kernels.reward_fn:kernel_reward"}


def register_reward(name: str):
    """Register a built-in reward under ``name`` (a duplicate name is a programming error)."""
    def deco(fn):
        if name in BUILTIN:
            raise ValueError(f"reward '{name}' is already registered")
        BUILTIN[name] = fn
        return fn
    return deco


@register_reward("math")
def math_reward(prompts, completions, answer, **kwargs) -> list[float | None]:
    return [None if a is None else math_check(completion_text(c), a) for c, a in zip(completions, answer)]


@register_reward("exact")
def exact_reward(prompts, completions, answer, **kwargs) -> list[float | None]:
    return [None if a is None else float(completion_text(c).strip() == str(a).strip())
            for c, a in zip(completions, answer)]


@register_reward("arith")
def arith_reward(prompts, completions, answer, **kwargs) -> list[float | None]:
    out = []
    for c, a in zip(completions, answer):
        got = extract_final_answer(completion_text(c))
        out.append(None if a is None else float(got is not None and got == str(a)))
    return out


@register_reward("format")
def format_reward(prompts, completions, **kwargs) -> list[float]:
    return [float(has_answer_marker(completion_text(c))) for c in completions]


# --------------------------------------------------------------------------------------------------
# Resolving names and import paths
# --------------------------------------------------------------------------------------------------

def _import_path(spec: str) -> Callable:
    mod_name, _, attr = spec.rpartition(":")
    if not mod_name or not attr:
        raise ShiftkitError(f"reward '{spec}': write a user function as pkg.module:function")
    try:
        if mod_name.endswith(".py"):
            path = Path(mod_name).expanduser()
            if not path.is_file():
                raise ShiftkitError(f"reward '{spec}': file not found: {path}")
            name = f"shiftkit_user_reward_{abs(hash(str(path.resolve())))}"
            s = importlib.util.spec_from_file_location(name, path)
            module = importlib.util.module_from_spec(s)
            sys.modules[name] = module
            s.loader.exec_module(module)
        else:
            module = importlib.import_module(mod_name)
    except ShiftkitError:
        raise
    except ModuleNotFoundError as e:
        raise ShiftkitError(f"reward '{spec}': cannot import module '{mod_name}' ({e}); is it on PYTHONPATH?") from None
    except Exception as e:  # noqa: BLE001 - the user's module failed while importing
        raise ShiftkitError(f"reward '{spec}': importing '{mod_name}' raised {type(e).__name__}: "
                            f"{_first_line(e)}") from None
    fn = getattr(module, attr, None)
    if fn is None:
        raise ShiftkitError(f"reward '{spec}': module '{mod_name}' has no function '{attr}'")
    if not callable(fn):
        raise ShiftkitError(f"reward '{spec}': '{attr}' in '{mod_name}' is not callable")
    return fn


def resolve_reward(spec: str) -> tuple[str, Callable]:
    """``(name, function)`` for a built-in name or a ``pkg.module:function`` path."""
    spec = spec.strip()
    if spec in BUILTIN:
        return spec, BUILTIN[spec]
    if spec in BY_PATH:
        return spec, _import_path(BY_PATH[spec])
    if ":" in spec:
        fn = _import_path(spec)
        return getattr(fn, "__name__", spec.rpartition(":")[2]), fn
    known = sorted([*BUILTIN, *BY_PATH])
    close = difflib.get_close_matches(spec, known, n=1)
    hint = f"did you mean '{close[0]}'? " if close else ""
    raise ShiftkitError(f"unknown reward '{spec}' ({hint}built in: {', '.join(known)}; "
                        "or a function as pkg.module:function)")


def needed_columns(fn: Callable) -> list[str]:
    """Dataset columns a reward function requires: its parameters without defaults, beyond TRL's own."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return []
    return [p.name for p in params
            if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.default is p.empty
            and p.name not in _NOT_COLUMNS]


def _first_line(e: BaseException) -> str:
    s = str(e).strip()
    return s.splitlines()[0] if s else type(e).__name__


# --------------------------------------------------------------------------------------------------
# Several rewards, weighted
# --------------------------------------------------------------------------------------------------

@dataclasses.dataclass
class RewardResult:
    total: list[float]  # weighted sum over the rewards that applied; NaN where none applied
    per_reward: dict[str, list[float]]  # NaN where the reward returned None
    metrics: dict[str, float]  # rewards/<name>/mean, rewards/<name>/std, rewards/<name>/none_frac, reward, ...
    extra: dict[str, list]  # columns a reward added with log_extra (for samples.jsonl)

    @property
    def scorable(self) -> list[bool]:
        return [not math.isnan(t) for t in self.total]


def _nanmean_std(xs: list[float]) -> tuple[float, float]:
    v = [x for x in xs if not math.isnan(x)]
    if not v:
        return float("nan"), float("nan")
    m = sum(v) / len(v)
    sd = math.sqrt(sum((x - m) ** 2 for x in v) / (len(v) - 1)) if len(v) > 1 else 0.0
    return m, sd


class Rewards:
    """The rewards of a run: ``Rewards(["math", "format"], [1.0, 0.1])``."""

    def __init__(self, specs: list[str] | str, weights: list[float] | None = None):
        if isinstance(specs, str):
            specs = [s for s in specs.split(",") if s.strip()]
        if not specs:
            raise ShiftkitError("no reward given: pass reward=<name> (math, exact, arith, format, kernel) or "
                                "pkg.module:function")
        pairs = [resolve_reward(s) for s in specs]
        names: list[str] = []
        for n, _ in pairs:  # unique metric names (two user functions may share a __name__)
            names.append(n if n not in names else f"{n}_{len(names)}")
        self.names = names
        self.fns = [fn for _, fn in pairs]
        self.specs = list(specs)
        weights = list(weights) if weights else [1.0] * len(self.fns)
        if len(weights) != len(self.fns):
            raise ShiftkitError(f"reward_weights has {len(weights)} values for {len(self.fns)} rewards "
                                f"({', '.join(self.specs)})")
        self.weights = [float(w) for w in weights]
        self.needs = {n: needed_columns(fn) for n, fn in zip(self.names, self.fns)}

    def need_answer(self) -> str:
        """Who needs the ``answer`` column ("reward 'math'"), for :func:`shiftkit.data.load_prompts`; "" if none."""
        who = [n for n, cols in self.needs.items() if "answer" in cols]
        return ", ".join(f"reward '{n}'" for n in who)

    def check_columns(self, columns: list[str], data: str = "the data") -> None:
        """Every column a reward requires must be in the dataset (before anything runs)."""
        for n, cols in self.needs.items():
            for c in cols:
                if c not in columns:
                    raise ShiftkitError(f"reward '{n}' needs column '{c}', which {data} lacks; "
                                        f"columns: {', '.join(columns) or '(none)'}")

    def describe(self) -> str:
        return ", ".join(f"{n} x{w:g}" for n, w in zip(self.names, self.weights))

    def _call(self, name: str, fn: Callable, n: int, kwargs: dict) -> list[float]:
        try:
            out = fn(**kwargs)
            if inspect.isawaitable(out):
                out = asyncio.run(_await(out))
        except ShiftkitError:
            raise
        except Exception as e:  # noqa: BLE001 - a user's reward failing is a user error
            raise ShiftkitError(f"reward '{name}' raised {type(e).__name__}: {_first_line(e)}") from None
        if isinstance(out, (str, bytes)) or not hasattr(out, "__len__"):
            raise ShiftkitError(f"reward '{name}' returned {type(out).__name__}, not a list with one float per "
                                "completion")
        out = list(out)
        if len(out) != n:
            raise ShiftkitError(f"reward '{name}' returned {len(out)} rewards for {n} completions "
                                "(one per completion expected)")
        vals = []
        for i, v in enumerate(out):
            if v is None:
                vals.append(float("nan"))
                continue
            try:
                if isinstance(v, str):
                    raise TypeError
                vals.append(float(v))
            except (TypeError, ValueError):
                raise ShiftkitError(f"reward '{name}' returned {v!r} for completion {i}; expected a float or None") from None
        return vals

    def __call__(self, prompts: list, completions: list, columns: dict[str, list] | None = None,
                 completion_ids: list | None = None, step: int = 0) -> RewardResult:
        """Score ``completions`` (one per prompt; repeat the prompts and columns for a group)."""
        n = len(completions)
        if len(prompts) != n:
            raise ValueError(f"{len(prompts)} prompts for {n} completions")
        columns = {k: v for k, v in (columns or {}).items() if k not in _NOT_COLUMNS}
        for k, v in columns.items():
            if len(v) != n:
                raise ValueError(f"column '{k}' has {len(v)} values for {n} completions")
        extra: dict[str, list] = {}
        logged: dict[str, list[float]] = {}

        def log_extra(column: str, values: list) -> None:
            extra[column] = list(values)

        def log_metric(name: str, value: float) -> None:
            logged.setdefault(name, []).append(float(value))

        kwargs = {"prompts": prompts, "completions": completions, "completion_ids": completion_ids,
                  "trainer_state": types.SimpleNamespace(global_step=step), "log_extra": log_extra,
                  "log_metric": log_metric, **columns}
        per: dict[str, list[float]] = {}
        for name, fn in zip(self.names, self.fns):
            per[name] = self._call(name, fn, n, kwargs)
        total = []
        for i in range(n):
            vals = [(w, per[name][i]) for name, w in zip(self.names, self.weights) if not math.isnan(per[name][i])]
            total.append(sum(w * v for w, v in vals) if vals else float("nan"))
        metrics: dict[str, float] = {}
        for name in self.names:
            m, sd = _nanmean_std(per[name])
            metrics[f"rewards/{name}/mean"], metrics[f"rewards/{name}/std"] = m, sd
            metrics[f"rewards/{name}/none_frac"] = sum(math.isnan(x) for x in per[name]) / n if n else 0.0
        metrics["reward"], metrics["reward_std"] = _nanmean_std(total)
        for k, v in logged.items():
            metrics[k] = sum(v) / len(v)
        return RewardResult(total, per, metrics, extra)

    def score(self, examples: list, completions: list[str], completion_ids: list | None = None,
              step: int = 0) -> RewardResult:
        """Score completions of :class:`shiftkit.data.Example` rows (``examples[i]`` is completion i's prompt).

        Conversational prompts get TRL's conversational completions (``[{"role": "assistant", ...}]``).
        """
        if len(examples) != len(completions):
            raise ValueError(f"{len(examples)} examples for {len(completions)} completions")
        prompts = [e.prompt for e in examples]
        comps = [[{"role": "assistant", "content": c}] if isinstance(p, list) else c for p, c in zip(prompts, completions)]
        keys: list[str] = []
        for e in examples:
            keys += [k for k in e.columns if k not in keys]
        cols = {k: [e.columns.get(k) for e in examples] for k in keys}
        return self(prompts, comps, cols, completion_ids, step)


class TaskRewards:
    """The arithmetic tasks' own checker (``Mixture.reward(problem, text)``) behind the
    :class:`Rewards` interface, for ``arith:`` data with the default reward."""

    def __init__(self, names: list[str]):
        self.mixture = Mixture(names)
        self.names = ["task"]
        self.weights = [1.0]

    def need_answer(self) -> str:
        return ""

    def check_columns(self, columns, data="") -> None:
        return None

    def describe(self) -> str:
        return "the arithmetic tasks' checker"

    def score(self, examples: list, completions: list[str], completion_ids=None, step: int = 0):
        total = [float(self.mixture.reward(e.problem, c)) for e, c in zip(examples, completions)]
        m = sum(total) / len(total) if total else float("nan")
        return RewardResult(total, {"task": total}, {"reward": m}, {})


async def _await(x):
    return await x
