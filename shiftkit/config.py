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
