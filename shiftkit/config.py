"""Typed flat configs with one source of defaults.

Every command's config is a ``@dataclass`` whose field defaults are the only defaults. A config is
built from (in order) the defaults, an optional YAML/JSON file, and ``key=value`` overrides from the
command line. Unknown keys are errors (with a close-match suggestion); values are coerced to the
field's annotated type and a wrong type is an error naming the key.

    cfg = load_config(GRPOConfig, path="rl.yaml", overrides=["lr=1e-4", "steps=50"])
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import math
import re
import types
import typing
from pathlib import Path
from typing import Any, TypeVar

from shiftkit.errors import ShiftkitError

T = TypeVar("T")


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", str(tp))


def _coerce(value: Any, tp: Any, key: str) -> Any:
    """Convert ``value`` (from YAML/JSON or a CLI string) to type ``tp``."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        if value is None or (isinstance(value, str) and value.lower() in ("none", "null")):
            if type(None) in args:
                return None
        errors = []
        for a in args:
            if a is type(None):
                continue
            try:
                return _coerce(value, a, key)
            except ShiftkitError as e:
                errors.append(str(e))
        raise ShiftkitError(f"config key '{key}': cannot read {value!r} as {tp}")
    if origin is typing.Literal:
        for a in args:
            if value == a or (isinstance(value, str) and str(a) == value):
                return a
        raise ShiftkitError(f"config key '{key}': {value!r} is not one of {list(args)}")
    if origin in (list, tuple):
        if isinstance(value, str):
            s = value.strip()
            if s.startswith("["):
                try:
                    value = json.loads(s)
                except json.JSONDecodeError:
                    value = [v.strip() for v in s.strip("[]").split(",") if v.strip()]
            else:
                value = [v.strip() for v in s.split(",") if v.strip()]
        if not isinstance(value, (list, tuple)):
            raise ShiftkitError(f"config key '{key}': expected a list, got {value!r}")
        elem = args[0] if args else Any
        out = [_coerce(v, elem, key) for v in value]
        return tuple(out) if origin is tuple else out
    if tp is Any:
        return value
    if tp is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "1", "yes", "on"):
            return True
        if isinstance(value, str) and value.lower() in ("false", "0", "no", "off"):
            return False
        if isinstance(value, int) and value in (0, 1):
            return bool(value)
        raise ShiftkitError(f"config key '{key}': expected true/false, got {value!r}")
    if tp is int:
        if isinstance(value, bool):
            raise ShiftkitError(f"config key '{key}': expected an integer, got {value!r}")
        if isinstance(value, int):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, str):
            try:
                f = float(value)
            except ValueError:
                f = None
            if f is not None and f.is_integer():
                return int(f)
        raise ShiftkitError(f"config key '{key}': expected an integer, got {value!r}")
    if tp is float:
        if isinstance(value, bool):
            raise ShiftkitError(f"config key '{key}': expected a number, got {value!r}")
        try:
            return float(value)
        except (TypeError, ValueError):
            raise ShiftkitError(f"config key '{key}': expected a number, got {value!r}") from None
    if tp is str:
        if isinstance(value, (dict, list)):
            raise ShiftkitError(f"config key '{key}': expected a string, got {value!r}")
        return str(value)
    if tp is dict or typing.get_origin(tp) is dict:
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except json.JSONDecodeError:
                raise ShiftkitError(f"config key '{key}': expected a JSON object, got {value!r}") from None
        if not isinstance(value, dict):
            raise ShiftkitError(f"config key '{key}': expected a mapping, got {value!r}")
        return value
    return value


def _field_types(cls: type) -> dict[str, Any]:
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls)}


def read_config_file(path: str | Path) -> dict[str, Any]:
    """Read a YAML or JSON config file into a flat dict (errors name the file)."""
    p = Path(path)
    if not p.is_file():
        raise ShiftkitError(f"config file not found: {p} (pass an existing .yaml or .json file)")
    text = p.read_text()
    try:
        if p.suffix == ".json":
            data = json.loads(text)
        else:
            import yaml

            data = yaml.safe_load(text)
    except Exception as e:  # noqa: BLE001 - any parse error becomes a one-line user error
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ShiftkitError(f"cannot parse config file {p}: {first}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ShiftkitError(f"config file {p} must hold a mapping of key: value, got {type(data).__name__}")
    return data


def parse_overrides(overrides: list[str] | None) -> dict[str, str]:
    """Turn ``["a=1", "b=x"]`` into ``{"a": "1", "b": "x"}``; a malformed item is an error."""
    out: dict[str, str] = {}
    for item in overrides or []:
        if "=" not in item:
            raise ShiftkitError(f"override '{item}' is not of the form key=value")
        k, v = item.split("=", 1)
        k = k.strip()
        if not k:
            raise ShiftkitError(f"override '{item}' has an empty key")
        out[k] = v
    return out


def from_dict(cls: type[T], data: dict[str, Any], source: str = "config") -> T:
    """Build dataclass ``cls`` from a flat dict; unknown keys and bad types are errors."""
    types_ = _field_types(cls)
    unknown = [k for k in data if k not in types_]
    if unknown:
        k = unknown[0]
        close = difflib.get_close_matches(k, list(types_), n=1)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        raise ShiftkitError(
            f"unknown config key '{k}' in {source}{hint}; valid keys for {cls.__name__}: {', '.join(sorted(types_))}"
        )
    kwargs = {k: _coerce(v, types_[k], k) for k, v in data.items()}
    try:
        cfg = cls(**kwargs)
    except TypeError as e:
        raise ShiftkitError(f"invalid {cls.__name__} from {source}: {e}") from None
    check_ranges(cfg)
    validate = getattr(cfg, "validate", None)
    if callable(validate):
        validate()
    return cfg


def load_config(
    cls: type[T],
    path: str | Path | None = None,
    overrides: list[str] | dict[str, Any] | None = None,
    base: dict[str, Any] | None = None,
) -> T:
    """Defaults <- ``base`` dict <- config file at ``path`` <- ``key=value`` overrides."""
    data: dict[str, Any] = dict(base or {})
    if path is not None:
        data.update(read_config_file(path))
    if isinstance(overrides, dict):
        data.update(overrides)
    else:
        data.update(parse_overrides(overrides))
    return from_dict(cls, data, source=str(path) if path else "overrides")


def to_dict(cfg: Any) -> dict[str, Any]:
    """A JSON-serialisable dict of a config dataclass."""
    return dataclasses.asdict(cfg)


def field_docs(cls: type) -> dict[str, str]:
    """The one-line meaning of each field: the ``# comment`` on its line in the class source
    (the dataclass is the one source of keys, defaults and meanings)."""
    import inspect
    import io
    import tokenize

    out: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if not dataclasses.is_dataclass(klass):
            continue
        try:
            src = inspect.getsource(klass)
        except (OSError, TypeError):
            continue
        names = {f.name for f in dataclasses.fields(klass)}
        line_field: dict[int, str] = {}
        for i, line in enumerate(src.splitlines(), 1):
            head = line.strip().split(":", 1)[0].strip()
            if head in names and line.startswith("    ") and not line.startswith("     "):
                line_field[i] = head
        try:
            for tok in tokenize.generate_tokens(io.StringIO(src).readline):
                if tok.type == tokenize.COMMENT and tok.start[0] in line_field:
                    out[line_field[tok.start[0]]] = tok.string.lstrip("#").strip()
        except (tokenize.TokenError, IndentationError):
            pass
    return out


def config_help(cls: type) -> str:
    """``key=default  meaning`` for every field of ``cls`` (for ``--help``)."""
    docs = field_docs(cls)
    rows = []
    own = set(cls.__dict__.get("__annotations__", {}))  # the command's own keys first, shared groups (e.g. memory) after
    for f in sorted(dataclasses.fields(cls), key=lambda f: f.name not in own):
        d = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        shown = json.dumps(d) if isinstance(d, (list, dict, bool)) or d is None else str(d)
        rows.append((f"{f.name}={shown}", docs.get(f.name, "")))
    w = min(36, max(len(a) for a, _ in rows) + 2)
    lines = [f"config keys of {cls.__name__} (key=default; set with key=value or --config FILE):"]
    for a, b in rows:
        lines.append(f"  {a:<{w}}{b}" if len(a) < w else f"  {a}\n  {'':<{w}}{b}")
    return "\n".join(lines)



def defaults(cls: type) -> dict[str, Any]:
    """Every field's default value of config dataclass ``cls``."""
    return {f.name: (f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default)
            for f in dataclasses.fields(cls)}


def check_dependent(cfg: Any, rules: dict[str, tuple[Any, str]], command: str) -> None:
    """Keys that only matter when another key is set: ``rules[key] = (read(cfg) -> bool, "when ...")``.

    A key set away from its default that the run would not read is an error naming what would make
    it count (never a silent no-op)."""
    defaults_ = defaults(type(cfg))
    for key, (is_read, when) in rules.items():
        if getattr(cfg, key) != defaults_[key] and not is_read(cfg):
            raise ShiftkitError(f"{command}: {key}={getattr(cfg, key)!r} is only read {when}; set that, "
                                f"or leave {key} at its default ({defaults_[key]!r})")


# ---- numeric ranges: one rule per key, for every command's config ----------------------------------
#
# A number out of its range is a one-line error naming the key, raised by :func:`from_dict` (so by every
# command and experiment, at config time: before a model loads or a file is written). The rule of a key
# is declared once here and holds in every config that has a key of that name; ``"Class.key"`` declares
# a different rule for one class. Every int and float key of a registered command or experiment has a
# rule (``tests/core/test_config_io.py`` checks it); an unlisted one must at least be finite.
# Rules: ``> a``, ``>= a``, an interval ``[a, b]`` / ``(a, b]`` / ``[a, b)`` / ``(a, b)``, or ``finite``.

RANGES: dict[str, str] = {
    # optimisation and schedule
    "lr": "> 0", "critic_lr": "> 0", "warm_lr": "> 0", "rl_lr": "> 0", "heal_lr": "> 0",
    "weight_decay": ">= 0", "grad_clip": ">= 0", "warmup": ">= 0",
    "steps": ">= 1", "weak_steps": ">= 1", "strong_steps": ">= 1", "rl_steps": ">= 1", "heal_steps": ">= 1",
    "comp_rl_steps": ">= 1", "expert_steps": ">= 1", "warm_steps": ">= 0", "value_pretrain_steps": ">= 0",
    "batch_size": ">= 1", "warm_batch": ">= 1", "heal_batch": ">= 1", "value_pretrain_batches": ">= 1",
    "ppo_epochs": ">= 1", "max_length": ">= 1", "train_rows": ">= 1",
    # rollouts and sampling
    "prompts_per_step": ">= 1", "group_size": ">= 1", "samples_per_prompt": ">= 1", "rl_prompts": ">= 1",
    "rl_group": ">= 1", "max_new_tokens": ">= 1", "temperature": "> 0", "AgentRunConfig.temperature": ">= 0",
    "eval_temperature": "> 0", "top_p": "(0, 1]", "eval_top_p": "(0, 1]", "top_k": ">= 1", "top_q": "(0, 1]",
    # the policy loss, KL and advantages
    "clip_low": ">= 0", "clip_high": ">= 0", "kl_coef": ">= 0", "kl_eps": "[0, 1)", "kl_min": ">= 0",
    "kl_max": ">= 0", "reward_scale": "> 0", "delta_clip": ">= 0", "grpo_weight": ">= 0", "gamma": "[0, 1]",
    "lam": "[0, 1]", "clip_dual": ">= 0", "dynamic_sampling": ">= 0", "value_clip": ">= 0", "determinism_tol": ">= 0", "guard_patience": ">= 0",
    "guard_min_eos_rate": "[0, 1]", "guard_min_len_frac": "[0, 1]", "warm_p_correct": "[0, 1]",
    "error_rate": "[0, 1]",
    # memory and LoRA
    "token_budget": ">= 0", "logit_chunk": ">= 0", "rollout_rows": ">= 0", "lora_r": ">= 0", "lora_alpha": ">= 0",
    "lora_dropout": "[0, 1)",
    # runs: evaluation, logs, checkpoints, processes
    "seed": ">= 0", "eval_seed": ">= 0", "secret_seed": ">= 0", "threads": ">= 0", "eval_every": ">= 0",
    "rl_eval_every": ">= 0", "eval_n": ">= 1", "n": ">= 1", "eval_samples": ">= 0", "eval_k": ">= 1",
    "samples": ">= 0", "max_samples": ">= 0", "samples_every": ">= 0", "samples_n": ">= 1", "save_every": ">= 0",
    "keep_checkpoints": ">= -1", "seeds": ">= 0", "reward_weights": "finite", "weak_layers": ">= 0",
    # SAR
    "niter": ">= 0", "oversample": ">= 0", "max_shard_mb": "> 0", "max_rel_delta": "> 0", "scale": "finite",
    "density": "(0, 1]", "merge_density": "(0, 1]", "merge_lambda": ">= 0", "target": ">= -1",
    "weights": "finite",
    # servers and clients
    "port": "[0, 65535]", "workers": ">= 1", "timeout": "> 0", "max_body_bytes": ">= 1", "max_n": ">= 1",
    "max_prompt_tokens": ">= 1", "max_rows": ">= 1", "queue": ">= 0", "slots": ">= 1", "max_sessions": ">= 1",
    "session_idle_s": "> 0", "deadline_s": "> 0", "max_request_mb": "> 0", "cache_entries": ">= 0",
    "max_frame_mb": ">= 1",
    # the kernel environment and the agent
    "level": ">= 0", "atol": ">= 0", "rtol": ">= 0", "trials": ">= 1", "timed_calls": ">= 1",
    "max_timed_calls": ">= 1", "timing_blocks": ">= 1", "min_block_rounds": ">= 1", "ci_level": "(0, 1)",
    "margin": ">= 0", "implausible_speedup": "> 0", "floor_bandwidth_factor": "> 0", "timeout_s": "> 0",
    "compile_timeout_s": "> 0", "build_jobs": ">= 1", "mem_limit_mb": ">= 0", "pids_max": ">= 1",
    "max_output_bytes": ">= 1", "llc_flush_mb": ">= 0", "degenerate_tol": ">= 0", "max_turns": ">= 1",
    "max_tokens": ">= 1", "max_tokens_per_turn": ">= 1", "wall_time_s": "> 0", "tool_timeout_s": "> 0",
    "eval_trials": ">= 1", "eval_timed_calls": ">= 1", "eval_warmup": ">= 0", "eval_timeout_s": "> 0",
    "min_depth": ">= 1", "max_depth": ">= 1", "min_ms": ">= 0", "max_ms": "> 0", "runtime_reps": ">= 1",
    "similarity_threshold": "[0, 1]", "compile_max": ">= 0", "llm_n": ">= 0",
    "depth_weights": ">= 0", "foreign_share_max": "(0, 1]", "sample_period_us": ">= 10",
    # the real-model experiment
    "train_per_task": ">= 1", "heal_rows": ">= 1", "heal_temperature": "> 0", "heal_max_new_tokens": ">= 1",
    "format_tol": "[0, 1]", "length_tol": ">= 0",
    # the kernel reward in the loops and the agent-kernels experiment
    "kernel_slots": ">= 0", "obs_max_tokens": ">= 1", "env_slots": ">= 1", "sft_rows": ">= 1", "sft_steps": ">= 1",
    "sft_lr": "> 0", "demo_episodes": ">= 1", "rft_episodes": ">= 1", "rft_steps": ">= 1", "st_steps": ">= 1",
    "st_lr": "> 0", "st_kl_coef": ">= 0", "mt_steps": ">= 1", "mt_lr": "> 0",
}

_RULE = re.compile(r"^\s*(?:(?P<op>>=|>)\s*(?P<x>-?[\d.]+)|(?P<lb>[\[(])\s*(?P<a>-?[\d.]+)\s*,\s*(?P<b>-?[\d.]+)\s*"
                   r"(?P<rb>[\])])|(?P<finite>finite))\s*$")


def in_range(value: float, rule: str) -> bool:
    """Whether the finite number ``value`` satisfies ``rule`` (see :data:`RANGES`)."""
    m = _RULE.match(rule)
    if m is None:
        raise ValueError(f"bad range rule {rule!r}")
    if not math.isfinite(value):
        return False
    if m["finite"]:
        return True
    if m["op"]:
        x = float(m["x"])
        return value >= x if m["op"] == ">=" else value > x
    a, b = float(m["a"]), float(m["b"])
    return (value >= a if m["lb"] == "[" else value > a) and (value <= b if m["rb"] == "]" else value < b)


def range_rule(cls: type, key: str) -> str | None:
    """The rule of ``key`` in config class ``cls``: ``"Class.key"`` (the class or a base), else ``key``."""
    for klass in cls.__mro__:
        if f"{klass.__name__}.{key}" in RANGES:
            return RANGES[f"{klass.__name__}.{key}"]
    return RANGES.get(key)


_SAID = {"> 0": "positive", ">= 1": "positive (>= 1)", ">= 0": "non-negative (>= 0)", "finite": "a finite number"}


def check_range(cls: type, key: str, value: Any) -> None:
    """Raise a one-line error when the number ``value`` of ``key`` is outside its rule (or not finite)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return
    rule = range_rule(cls, key) or "finite"
    if not in_range(float(value), rule):
        what = _SAID.get(rule, f"in {rule}" if rule[0] in "[(" else rule)
        raise ShiftkitError(f"config key '{key}': {value!r} is out of range; it must be {what} "
                            f"(set {key}=... in the config file or on the command line)")


def check_ranges(cfg: Any) -> None:
    """Range-check every number of config dataclass ``cfg`` (:data:`RANGES`); a list checks each item."""
    for f in dataclasses.fields(cfg):
        v = getattr(cfg, f.name)
        for x in v if isinstance(v, (list, tuple)) else [v]:
            check_range(type(cfg), f.name, x)
