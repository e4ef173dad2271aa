"""One dataset layer for ``sft``, ``rl``, ``opd``, ``eval`` and the agent.

``data=`` names a source:

* a local file: ``.jsonl``, ``.json`` (a list of objects, or an object of equal-length column
  lists), ``.parquet`` (needs ``pyarrow``), ``.csv``, or ``.txt`` (one prompt per line, column
  ``prompt``);
* a directory: a ``datasets`` ``save_to_disk`` directory, or a folder of data files whose names
  give the splits (``train.jsonl``, ``test.parquet``; needs ``datasets``);
* a hub dataset id (``owner/name``) that is **already in the local HF cache**: nothing is
  downloaded; an uncached id fails at once with the cache path in the message;
* ``arith:add,mul`` (or ``arith:add:2-3,sub``): the built-in arithmetic tasks of
  :mod:`shiftkit.tasks`, generated per step for training and a fixed held-out set for evaluation.

Rows follow TRL's conventions. A prompt (column ``prompt_key``, default ``prompt``) is a string
("prompt-only") or a list of chat messages ("conversational"); ``system_prompt`` turns a string
into ``[system, user]`` messages or prepends a system message. The answer column (``answer_key``)
becomes :attr:`Example.answer` and reaches reward functions as ``answer``; every other column is
passed through unchanged (TRL passes dataset columns to reward functions as keyword arguments).
SFT rows are ``prompt``/``completion`` (strings or message lists), ``messages`` or plain ``text``.

Order and size: ``split`` picks a split (a file is one split), ``eval_split`` holds out a named
split or a fraction (a fixed seed, so the held-out rows do not change with the training seed),
``shuffle`` with ``seed`` shuffles before ``max_samples`` keeps the first rows, and
:meth:`PromptDataset.draw` walks seeded per-epoch permutations, a pure function of
``(seed, step)`` so a resumed run sees the same batches.

Every bad input is a one-line :class:`ShiftkitError` naming the file, row and column.
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import json
import math
import os
import random
import re
from pathlib import Path
from typing import Any, Iterator

from shiftkit.config import defaults
from shiftkit.errors import ShiftkitError
from shiftkit.tasks import Mixture, eval_set, get_task

FILE_KINDS = {".jsonl": "jsonl", ".json": "json", ".parquet": "parquet", ".csv": "csv", ".txt": "txt"}
SINGLE = "train"  # the split name of a single file (as in ``datasets``)
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


# --------------------------------------------------------------------------------------------------
# Config keys
# --------------------------------------------------------------------------------------------------

@dataclasses.dataclass
class DataKeys:
    """The data keys of every command (``sft``, ``rl``, ``opd``, ``eval``), declared once and mixed into
    each command's config as :class:`~shiftkit.microbatch.MemoryConfig` is."""

    data: str = ""  # a .jsonl/.json/.parquet/.csv/.txt file, a dataset dir, a cached hub id, or arith:add,mul
    tasks: list[str] = dataclasses.field(default_factory=list)  # shorthand for data=arith:<tasks> (the toy tasks)
    split: str = ""  # dataset split ("" = the only one, else the command's default: train / test)
    subset: str = ""  # hub/directory dataset configuration name (e.g. gsm8k's "main")
    prompt_key: str = "prompt"  # column with the prompt: a string or a list of chat messages
    system_prompt: str = ""  # system message added to every prompt
    shuffle: bool = True  # seeded shuffle of the rows (before max_samples) and of each epoch
    max_samples: int = 0  # keep at most this many rows (0 = all)

    def check_data(self, command: str) -> None:
        """``data=`` or ``tasks=`` (not both). Keys the run would not read, given the data, are errors (not
        silent no-ops): on arith data (generated) the file keys, on user data the arith held-out size."""
        if self.tasks and self.data:
            raise ShiftkitError(f"{command}: give data=... or tasks=... (shorthand for data=arith:...), not both")
        arith = bool(self.tasks) or is_arith(self.data)
        default = defaults(type(self))
        unread = []
        if arith:
            unread += [k for k in ("split", "subset", "prompt_key", "answer_key", "completion_key", "max_samples",
                                   "eval_split", "shuffle") if hasattr(self, k) and getattr(self, k) != default[k]]
        elif self.data:
            unread += [k for k in ("eval_n",) if hasattr(self, k) and getattr(self, k) != default[k]]
        if unread:
            why = "arith data is generated" if arith else "eval_n counts arith held-out problems"
            raise ShiftkitError(f"{command}: data={self.data or 'arith:' + ','.join(self.tasks)} does not read "
                                f"{', '.join(unread)} ({why}); leave {'it' if len(unread) == 1 else 'them'} at the default")


@dataclasses.dataclass
class AnswerKey:
    """The reference-answer column (commands with rewards: ``rl``, ``opd``, ``eval``)."""

    answer_key: str = "answer"  # column with the reference answer (reaches rewards as `answer`)


@dataclasses.dataclass
class CompletionKey:
    """The completion column of prompt/completion rows (``sft``)."""

    completion_key: str = "completion"  # completion column of prompt/completion rows


@dataclasses.dataclass
class HeldOutKeys:
    """Held-out rows of a training run (``sft``, ``rl``, ``opd``)."""

    eval_split: str = ""  # held-out rows for periodic eval: a split name or a fraction like 0.05 (user data only)


@dataclasses.dataclass
class DataArgs(DataKeys, AnswerKey, CompletionKey, HeldOutKeys):
    """What the loaders read: a command's data keys (:meth:`from_config`) and the arith held-out size."""

    arith_n: int = 100  # arith sources: held-out problems per domain

    @classmethod
    def from_config(cls, cfg: Any) -> "DataArgs":
        """The data keys of any config object that has (some of) them."""
        return cls(**{f.name: getattr(cfg, f.name) for f in dataclasses.fields(cls) if hasattr(cfg, f.name)})


# --------------------------------------------------------------------------------------------------
# Rows
# --------------------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Example:
    """One prompt with its reference answer and pass-through columns."""

    prompt: str | list[dict]  # plain text, or chat messages (the system prompt folded in)
    answer: str | None
    columns: dict[str, Any]  # the row's other columns (for reward functions), `answer` included
    where: str  # "file.jsonl:17": for error messages
    problem: Any = None  # the tasks.Problem of an arith example (the toy loops' checker uses it)


@dataclasses.dataclass(frozen=True)
class SFTRow:
    """One supervised row in one of TRL's formats."""

    kind: str  # prompt_completion | messages | text
    prompt: str | list[dict] | None  # None for text rows
    completion: str | list[dict] | None  # messages rows: None (the messages hold the completion)
    messages: list[dict] | None
    text: str | None
    where: str


def _epoch_positions(n_rows: int, seed: int, step: int, n: int, shuffle: bool, cache: dict) -> list[int]:
    out = []
    for g in range(step * n, step * n + n):
        epoch, off = divmod(g, n_rows)
        if epoch not in cache:
            perm = list(range(n_rows))
            if shuffle:
                random.Random(f"epoch:{seed}:{epoch}").shuffle(perm)
            cache.clear()  # keep one epoch's permutation
            cache[epoch] = perm
        out.append(cache[epoch][off])
    return out


class _Finite:
    """A fixed list of rows with a deterministic batch order."""

    items: list
    shuffle: bool
    name: str

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i):
        return self.items[i]

    def __iter__(self):
        return iter(self.items)

    def draw(self, seed: int, step: int, n: int) -> list:
        """Batch ``step`` of size ``n``: positions ``[step*n, step*n+n)`` of seeded per-epoch orders."""
        return [self.items[i] for i in _epoch_positions(len(self.items), seed, step, n, self.shuffle, self._perm)]


class PromptDataset(_Finite):
    """Prompts (with answers and columns) for RL, OPD and evaluation."""

    def __init__(self, name: str, items: list[Example], columns: list[str], shuffle: bool = True,
                 eval: "PromptDataset | None" = None):
        self.name, self.items, self.columns, self.shuffle, self.eval = name, items, columns, shuffle, eval
        self._perm: dict = {}

    @property
    def examples(self) -> list[Example]:
        return self.items

    def describe(self) -> str:
        kind = "chat messages" if self.items and isinstance(self.items[0].prompt, list) else "text"
        ev = f", {len(self.eval)} held out" if self.eval is not None else ""
        return f"{self.name}: {len(self)} prompts ({kind}){ev}; columns: {', '.join(self.columns)}"


class SFTDataset(_Finite):
    def __init__(self, name: str, items: list[SFTRow], columns: list[str], shuffle: bool = True,
                 eval: "SFTDataset | None" = None):
        self.name, self.items, self.columns, self.shuffle, self.eval = name, items, columns, shuffle, eval
        self._perm: dict = {}
        self.kind = items[0].kind if items else ""

    def draw_sft(self, seed: int, step: int, n: int) -> list[SFTRow]:
        """The same as :meth:`draw` (the SFT loop calls ``draw_sft`` on any SFT source)."""
        return self.draw(seed, step, n)

    def describe(self) -> str:
        ev = f", {len(self.eval)} held out" if self.eval is not None else ""
        return f"{self.name}: {len(self)} {self.kind} rows{ev}"


# --------------------------------------------------------------------------------------------------
# The arithmetic tasks as a source
# --------------------------------------------------------------------------------------------------

def _problem_example(p) -> Example:
    return Example(p.prompt, p.answer, {"answer": p.answer, "domain": p.domain, "difficulty": p.difficulty},
                   f"arith {p.domain} {p.prompt}", p)


class ArithSource:
    """``arith:add,mul``: problems drawn per step (training) or a fixed held-out set (evaluation).

    :meth:`draw` makes exactly the draws of the GRPO/OPD loops (``random.Random("rl:{seed}:{step}")``)
    and :meth:`draw_sft` those of the SFT loop (a trace after each problem), so the toy world's
    results do not change when it goes through this layer.
    """

    def __init__(self, names: list[str], system_prompt: str = "", n_per_domain: int = 100, error_rate: float = 0.0):
        self.names = list(names)
        self.mixture = Mixture(self.names)
        self.system_prompt = system_prompt
        self.n_per_domain = n_per_domain
        self.error_rate = error_rate
        self.name = "arith:" + ",".join(self.names)
        self.columns = ["answer", "domain", "difficulty"]
        self.eval = None

    def _ex(self, p) -> Example:
        e = _problem_example(p)
        if self.system_prompt:
            e = dataclasses.replace(e, prompt=_with_system(e.prompt, self.system_prompt))
        return e

    def draw(self, seed: int, step: int, n: int) -> list[Example]:
        rng = random.Random(f"rl:{seed}:{step}")
        return [self.draw_one(rng) for _ in range(n)]

    def draw_one(self, rng: random.Random) -> Example:
        return self._ex(self.mixture.sample(rng, "train"))

    def draw_sft(self, seed: int, step: int, n: int) -> list[SFTRow]:
        rng = random.Random(f"sft:{seed}:{step}")
        out = []
        for _ in range(n):
            p = self.mixture.sample(rng, "train")
            out.append(SFTRow("prompt_completion", p.prompt, self.mixture.trace(p, rng, self.error_rate), None, None,
                              f"arith {p.domain} {p.prompt}"))
        return out

    def held_out(self, n_per_domain: int | None = None, seed: int = 12345) -> PromptDataset:
        items = [self._ex(p) for p in eval_set(self.names, n_per_domain or self.n_per_domain, seed)]
        return PromptDataset(self.name + " (test)", items, self.columns, shuffle=False)

    def describe(self) -> str:
        return f"{self.name}: generated arithmetic problems ({', '.join(self.names)})"


def parse_arith(spec: str) -> list[str]:
    body = spec.split(":", 1)[1] if ":" in spec else ""
    names = [n.strip() for n in body.split(",") if n.strip()]
    if not names:
        raise ShiftkitError(f"data={spec}: name the arithmetic domains, e.g. data=arith:add,mul")
    for n in names:
        get_task(n)  # validates the name and digit range (one-line error)
    return names


def is_arith(data: str) -> bool:
    return data == "arith" or data.startswith("arith:")


# --------------------------------------------------------------------------------------------------
# Reading raw rows
# --------------------------------------------------------------------------------------------------

@dataclasses.dataclass
class RawSplit:
    rows: list[dict]
    where: Any  # callable: row index -> "file:line"
    name: str  # the source, for messages


def _jsonl(p: Path) -> RawSplit:
    rows, lines = [], []
    try:
        text = p.read_text()
    except UnicodeDecodeError:
        raise ShiftkitError(f"{p}: not a UTF-8 text file") from None
    for i, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            r = json.loads(line)
        except json.JSONDecodeError as e:
            raise ShiftkitError(f"{p}:{i}: not valid JSON ({e.msg})") from None
        if not isinstance(r, dict):
            raise ShiftkitError(f"{p}:{i}: expected a JSON object per line, got {type(r).__name__}")
        rows.append(r)
        lines.append(i)
    return RawSplit(rows, lambda k: f"{p}:{lines[k]}", str(p))


def _json(p: Path) -> RawSplit:
    try:
        obj = json.loads(p.read_text())
    except json.JSONDecodeError as e:
        hint = " (one object per line? name it .jsonl)" if "Extra data" in e.msg else ""
        raise ShiftkitError(f"{p}: not valid JSON ({e.msg}, line {e.lineno}){hint}") from None
    if isinstance(obj, dict) and obj and all(isinstance(v, list) for v in obj.values()):
        lens = {len(v) for v in obj.values()}
        if len(lens) != 1:
            raise ShiftkitError(f"{p}: columns have different lengths {sorted(lens)}")
        keys = list(obj)
        obj = [{k: obj[k][i] for k in keys} for i in range(lens.pop())]
    if not isinstance(obj, list):
        raise ShiftkitError(f"{p}: expected a list of objects (or an object of column lists), got {type(obj).__name__}")
    for i, r in enumerate(obj):
        if not isinstance(r, dict):
            raise ShiftkitError(f"{p} row {i + 1}: expected an object, got {type(r).__name__}")
    return RawSplit(obj, lambda k: f"{p} row {k + 1}", str(p))


def _csv(p: Path) -> RawSplit:
    with open(p, newline="") as f:
        reader = csv.DictReader(f)
        rows = []
        for r in reader:
            if None in r:
                raise ShiftkitError(f"{p}:{reader.line_num}: more fields than the header has columns")
            rows.append(dict(r))
    return RawSplit(rows, lambda k: f"{p} row {k + 1}", str(p))


def _txt(p: Path) -> RawSplit:
    rows, lines = [], []
    for i, line in enumerate(p.read_text().splitlines(), 1):
        if line.strip():
            rows.append({"prompt": line})
            lines.append(i)
    return RawSplit(rows, lambda k: f"{p}:{lines[k]}", str(p))


def _parquet(p: Path) -> RawSplit:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise ShiftkitError(f"reading {p} needs pyarrow: pip install pyarrow (it comes with datasets/trl)") from None
    try:
        rows = pq.read_table(p).to_pylist()
    except Exception as e:  # noqa: BLE001 - a corrupt file is a user error
        raise ShiftkitError(f"cannot read parquet file {p}: {str(e).splitlines()[0] if str(e) else type(e).__name__}") from None
    return RawSplit(rows, lambda k: f"{p} row {k + 1}", str(p))


def _read_file(p: Path) -> RawSplit:
    kind = FILE_KINDS.get(p.suffix.lower())
    if kind is None:
        raise ShiftkitError(f"{p}: unknown data file type '{p.suffix}' (use {', '.join(FILE_KINDS)})")
    return {"jsonl": _jsonl, "json": _json, "csv": _csv, "parquet": _parquet, "txt": _txt}[kind](p)


def _need_datasets(what: str):
    try:
        import datasets
    except ImportError:
        raise ShiftkitError(f"reading {what} needs the 'datasets' package: pip install datasets") from None
    return datasets


@contextlib.contextmanager
def _offline(datasets_mod) -> Iterator[None]:
    """HF_HUB_OFFLINE semantics for the duration of a load: nothing reaches the network."""
    keys = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")
    old_env = {k: os.environ.get(k) for k in keys}
    old_cfg = {k: getattr(datasets_mod.config, k, None) for k in keys}
    for k in keys:
        os.environ[k] = "1"
        if hasattr(datasets_mod.config, k):
            setattr(datasets_mod.config, k, True)
    try:
        yield
    finally:
        for k, v in old_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        for k, v in old_cfg.items():
            if v is not None:
                setattr(datasets_mod.config, k, v)


def _dataset_dict(obj, name: str) -> dict[str, RawSplit]:
    """A datasets Dataset or DatasetDict -> {split: RawSplit}."""
    if isinstance(obj, dict):  # a DatasetDict (a dict subclass: split -> Dataset)
        return {s: RawSplit(obj[s].to_list(), (lambda s: lambda k: f"{name}[{s}] row {k + 1}")(s), f"{name}[{s}]")
                for s in obj.keys()}
    return {SINGLE: RawSplit(obj.to_list(), lambda k: f"{name} row {k + 1}", name)}


def _first_line(e: Exception) -> str:
    s = str(e).strip()
    return s.splitlines()[0] if s else type(e).__name__


def _read_dir(p: Path, subset: str, shown: str = "") -> dict[str, RawSplit]:
    shown = shown or f"dataset directory {p}"
    datasets = _need_datasets(shown)
    with _offline(datasets):
        try:
            if (p / "dataset_dict.json").is_file() or (p / "state.json").is_file():
                obj = datasets.load_from_disk(str(p))
            else:
                obj = datasets.load_dataset(str(p), name=subset or None)
        except Exception as e:  # noqa: BLE001 - anything datasets raises on a user's directory is a user error
            hint = " (choose one with subset=<name>)" if "config" in str(e).lower() and not subset else ""
            raise ShiftkitError(f"cannot read {shown}: {_first_line(e)}{hint}") from None
    return _dataset_dict(obj, str(p))


def hub_cache_dir() -> str:
    from huggingface_hub import constants

    return os.environ.get("HF_HUB_CACHE") or constants.HF_HUB_CACHE


def _read_hub(repo_id: str, subset: str) -> dict[str, RawSplit]:
    from huggingface_hub import snapshot_download

    cache = hub_cache_dir()
    try:
        snap = snapshot_download(repo_id, repo_type="dataset", local_files_only=True, cache_dir=cache)
    except Exception:  # noqa: BLE001 - LocalEntryNotFoundError and friends: not cached
        raise ShiftkitError(
            f"data={repo_id} is no local file or directory, and hub dataset '{repo_id}' is not in the local cache "
            f"({cache}); nothing is downloaded at run time: run `hf download --repo-type dataset {repo_id}` first, "
            "or pass a local file") from None
    splits = _read_dir(Path(snap), subset, f"hub dataset '{repo_id}' (cached at {snap})")
    return {s: dataclasses.replace(r, name=f"{repo_id}[{s}]",
                                   where=(lambda s: lambda k: f"{repo_id}[{s}] row {k + 1}")(s))
            for s, r in splits.items()}


def read_splits(data: str, subset: str = "") -> dict[str, RawSplit]:
    """All splits of a source as raw rows (a file is the one split ``train``)."""
    if not data:
        raise ShiftkitError("no data given: pass data=<file, directory, cached hub id or arith:add,mul>")
    p = Path(data).expanduser()
    if p.is_file():
        return {SINGLE: _read_file(p)}
    if p.is_dir():
        return _read_dir(p, subset)
    if p.suffix.lower() in FILE_KINDS or data.startswith((".", "/", "~")) or not _HUB_ID.match(data):
        raise ShiftkitError(f"data file not found: {data}")
    return _read_hub(data, subset)


def _pick_split(splits: dict[str, RawSplit], split: str, default: str, data: str) -> tuple[str, RawSplit]:
    if split:
        if split in splits:
            return split, splits[split]
        if list(splits) == [SINGLE]:
            raise ShiftkitError(f"data={data} is a single file (one split); drop split={split} or pass a dataset "
                                "with splits")
        raise ShiftkitError(f"data={data} has no split '{split}' (splits: {', '.join(splits)})")
    if len(splits) == 1:
        return next(iter(splits.items()))
    if default in splits:
        return default, splits[default]
    raise ShiftkitError(f"data={data} has splits {', '.join(splits)}; choose one with split=<name>")


# --------------------------------------------------------------------------------------------------
# Column mapping and validation
# --------------------------------------------------------------------------------------------------

def _columns_of(rows: list[dict]) -> list[str]:
    return list(rows[0].keys()) if rows else []


def check_messages(value: Any, where: str, column: str) -> list[dict]:
    if not isinstance(value, list) or not value:
        raise ShiftkitError(f"{where}: column '{column}' must be a non-empty list of chat messages")
    for j, m in enumerate(value):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str) or "content" not in m:
            raise ShiftkitError(f"{where}: column '{column}' message {j} must be an object with 'role' and 'content'")
        if m["content"] is None:
            raise ShiftkitError(f"{where}: column '{column}' message {j} has no content")
    return value


def _prompt_value(value: Any, where: str, key: str) -> str | list[dict]:
    if isinstance(value, str):
        if not value.strip():
            raise ShiftkitError(f"{where}: column '{key}' is empty")
        return value
    if isinstance(value, list):
        return check_messages(value, where, key)
    if value is None:
        raise ShiftkitError(f"{where}: column '{key}' is null")
    raise ShiftkitError(f"{where}: column '{key}' must be a string or a list of chat messages, "
                        f"got {type(value).__name__}")


def _with_system(prompt: str | list[dict], system: str) -> list[dict]:
    if isinstance(prompt, str):
        return [{"role": "system", "content": system}, {"role": "user", "content": prompt}]
    if prompt and prompt[0].get("role") == "system":
        return prompt
    return [{"role": "system", "content": system}, *prompt]


def _answer_value(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _select(rows: list, args: DataArgs, seed: int, keep_order: bool = False) -> list:
    """Seeded shuffle, then the first ``max_samples``; ``keep_order`` (evaluation) keeps file order."""
    idx = list(range(len(rows)))
    if args.shuffle:
        random.Random(f"data:{seed}").shuffle(idx)
    if args.max_samples < 0:
        raise ShiftkitError(f"max_samples must be >= 0, got {args.max_samples}")
    if args.max_samples:
        idx = idx[: args.max_samples]
    if keep_order:
        idx.sort()
    return [rows[i] for i in idx]


def _eval_fraction(s: str) -> float | None:
    try:
        f = float(s)
    except ValueError:
        return None
    if not 0.0 < f < 1.0:
        raise ShiftkitError(f"eval_split={s}: a fraction must be in (0, 1), or give a split name")
    return f


def _hold_out(rows: list, frac: float) -> tuple[list, list]:
    """Split off ``ceil(frac * n)`` rows with a fixed seed (independent of the training seed)."""
    n_eval = max(1, math.ceil(frac * len(rows)))
    if n_eval >= len(rows):
        raise ShiftkitError(f"eval_split={frac} leaves no training rows out of {len(rows)}")
    idx = list(range(len(rows)))
    random.Random("eval_split").shuffle(idx)
    held = set(idx[:n_eval])
    return [r for i, r in enumerate(rows) if i not in held], [r for i, r in enumerate(rows) if i in held]


def _raw_for(args: DataArgs, default_split: str) -> tuple[RawSplit, RawSplit | None]:
    """The chosen split and the eval split (a named split, a held-out fraction, or None)."""
    splits = read_splits(args.data, args.subset)
    _, raw = _pick_split(splits, args.split, default_split, args.data)
    if not raw.rows:
        raise ShiftkitError(f"dataset {raw.name} is empty")
    ev = None
    if args.eval_split:
        frac = _eval_fraction(args.eval_split)
        if frac is None:
            _, ev = _pick_split(splits, args.eval_split, "", args.data)
            if not ev.rows:
                raise ShiftkitError(f"eval split {ev.name} is empty")
        else:
            idx_tr, idx_ev = _hold_out(list(range(len(raw.rows))), frac)
            where = raw.where
            ev = RawSplit([raw.rows[i] for i in idx_ev], (lambda w, ix: lambda k: w(ix[k]))(where, idx_ev),
                          raw.name + " (held out)")
            raw = RawSplit([raw.rows[i] for i in idx_tr], (lambda w, ix: lambda k: w(ix[k]))(where, idx_tr),
                           raw.name)
    return raw, ev


def _examples(raw: RawSplit, args: DataArgs, need_answer: str, seed: int,
              keep_order: bool = False) -> tuple[list[Example], list[str]]:
    cols = _columns_of(raw.rows)
    if args.prompt_key not in raw.rows[0]:
        hint = " (set prompt_key=<column>)" if args.prompt_key == "prompt" else ""
        raise ShiftkitError(f"{raw.name}: no column '{args.prompt_key}' (prompt_key){hint}; "
                            f"columns: {', '.join(cols) or '(none)'}")
    if need_answer and args.answer_key not in raw.rows[0]:
        raise ShiftkitError(f"{raw.name}: no column '{args.answer_key}' (answer_key, needed by {need_answer}); "
                            f"columns: {', '.join(cols) or '(none)'}")
    has_answer = args.answer_key in raw.rows[0]
    out = []
    for k, r in enumerate(raw.rows):
        where = raw.where(k)
        if args.prompt_key not in r:
            raise ShiftkitError(f"{where}: no column '{args.prompt_key}' (prompt_key); columns: {', '.join(r)}")
        prompt = _prompt_value(r[args.prompt_key], where, args.prompt_key)
        if args.system_prompt:
            prompt = _with_system(prompt, args.system_prompt)
        answer = None
        if has_answer:
            if args.answer_key not in r:
                raise ShiftkitError(f"{where}: no column '{args.answer_key}' (answer_key); columns: {', '.join(r)}")
            answer = _answer_value(r[args.answer_key])
            if need_answer and answer is None:
                raise ShiftkitError(f"{where}: column '{args.answer_key}' is null (needed by {need_answer})")
        columns = {c: v for c, v in r.items() if c != args.prompt_key}
        if has_answer:
            columns["answer"] = answer
        out.append(Example(prompt, answer, columns, where))
    return _select(out, args, seed, keep_order), [c for c in cols if c != args.prompt_key] + (
        ["answer"] if has_answer and "answer" not in cols else [])


def load_prompts(args: DataArgs, *, seed: int = 0, default_split: str = "train", need_answer: str = "",
                 error_rate: float = 0.0, keep_order: bool = False) -> PromptDataset | ArithSource:
    """Prompts for RL / OPD (``draw``) or evaluation (iterate; see :func:`load_eval`).

    ``need_answer`` names who needs the answer column (e.g. "reward 'math'"); when set, a missing
    or null answer is an error. ``ds.eval`` holds the ``eval_split`` rows (or None).
    """
    if is_arith(args.data):
        return ArithSource(parse_arith(args.data), args.system_prompt, args.arith_n, error_rate)
    raw, ev = _raw_for(args, default_split)
    items, cols = _examples(raw, args, need_answer, seed, keep_order)
    if not items:
        raise ShiftkitError(f"dataset {raw.name} is empty")
    eval_ds = None
    if ev is not None:
        ev_items, _ = _examples(ev, dataclasses.replace(args, shuffle=False, max_samples=0), need_answer, seed)
        eval_ds = PromptDataset(ev.name, ev_items, cols, shuffle=False)
    return PromptDataset(raw.name, items, cols, args.shuffle, eval_ds)


def load_eval(args: DataArgs, *, seed: int = 0, need_answer: str = "") -> PromptDataset:
    """A finite evaluation set in file order: the ``test`` split by default (or the only split);
    arith sources give their fixed held-out set. ``max_samples`` keeps a seeded subset."""
    if is_arith(args.data):
        src = ArithSource(parse_arith(args.data), args.system_prompt, args.arith_n)
        ds = src.held_out()
        if args.max_samples:
            ds.items = ds.items[: args.max_samples]
        return ds
    ds = load_prompts(dataclasses.replace(args, eval_split=""), seed=seed, default_split="test",
                      need_answer=need_answer, keep_order=True)
    ds.shuffle = False
    return ds


# --------------------------------------------------------------------------------------------------
# SFT rows
# --------------------------------------------------------------------------------------------------

def sft_format(columns: list[str], args: DataArgs) -> str:
    """Which of TRL's SFT formats a set of columns holds (prompt/completion wins, then messages, then text)."""
    if args.prompt_key in columns and args.completion_key in columns:
        return "prompt_completion"
    if "messages" in columns:
        return "messages"
    if "text" in columns:
        return "text"
    return ""


def _sft_rows(raw: RawSplit, args: DataArgs) -> list[SFTRow]:
    cols = _columns_of(raw.rows)
    kind = sft_format(cols, args)
    if not kind:
        raise ShiftkitError(f"{raw.name}: SFT rows need '{args.prompt_key}'+'{args.completion_key}', 'messages' or "
                            f"'text' columns; columns: {', '.join(cols) or '(none)'}")
    out = []
    for k, r in enumerate(raw.rows):
        where = raw.where(k)
        if kind == "prompt_completion":
            for key in (args.prompt_key, args.completion_key):
                if key not in r:
                    raise ShiftkitError(f"{where}: no column '{key}'; columns: {', '.join(r)}")
            p = _prompt_value(r[args.prompt_key], where, args.prompt_key)
            c = r[args.completion_key]
            if isinstance(c, list):
                c = check_messages(c, where, args.completion_key)
            elif not isinstance(c, str):
                raise ShiftkitError(f"{where}: column '{args.completion_key}' must be a string or chat messages, "
                                    f"got {type(c).__name__}")
            if isinstance(p, list) != isinstance(c, list):
                raise ShiftkitError(f"{where}: '{args.prompt_key}' and '{args.completion_key}' must both be strings "
                                    "or both be chat messages")
            if args.system_prompt:
                p = _with_system(p, args.system_prompt)
            out.append(SFTRow(kind, p, c, None, None, where))
        elif kind == "messages":
            m = check_messages(r.get("messages"), where, "messages")
            if m[-1]["role"] != "assistant":
                raise ShiftkitError(f"{where}: the last message must be the assistant's (the completion), "
                                    f"got role '{m[-1]['role']}'")
            if args.system_prompt:
                m = _with_system(m, args.system_prompt)
            out.append(SFTRow(kind, None, None, m, None, where))
        else:
            t = r.get("text")
            if not isinstance(t, str) or not t.strip():
                raise ShiftkitError(f"{where}: column 'text' must be a non-empty string")
            out.append(SFTRow(kind, None, None, None, t, where))
    return out


def load_sft(args: DataArgs, *, seed: int = 0, error_rate: float = 0.0) -> SFTDataset | ArithSource:
    """SFT rows (``draw``); arith sources write traces with ``error_rate`` (``draw_sft``)."""
    if is_arith(args.data):
        return ArithSource(parse_arith(args.data), args.system_prompt, args.arith_n, error_rate)
    raw, ev = _raw_for(args, "train")
    items = _select(_sft_rows(raw, args), args, seed)
    if not items:
        raise ShiftkitError(f"dataset {raw.name} is empty")
    eval_ds = SFTDataset(ev.name, _sft_rows(ev, args), _columns_of(ev.rows), shuffle=False) if ev else None
    return SFTDataset(raw.name, items, _columns_of(raw.rows), args.shuffle, eval_ds)
