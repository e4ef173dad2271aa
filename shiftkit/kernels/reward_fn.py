"""The kernel reward as a TRL reward function, the single-turn prompt, and the dataset it reads.

    from shiftkit.kernels.reward_fn import kernel_reward, make_kernel_reward
    rewards = kernel_reward(prompts, completions, problem=[...])           # in process
    fn = make_kernel_reward(kernel_env_url="http://127.0.0.1:8000")        # a served environment

**Prompt and answer format** (:func:`render_prompt`, :func:`extract_solution`): the prompt shows the
KernelBench problem and asks for ``ModelNew`` as either

* one fenced file: a single fenced ``python`` block holding the complete solution file (KernelBench's
  single-file format; the last such block that defines ``ModelNew`` is taken), or
* a workspace (CUDA Agent's layout): one fenced block per file whose info string names the file,
  e.g. ```` ```python model_new.py ```` and ```` ```cpp kernels/fused.cpp ````; ``model_new.py`` is required.

**Reward** (:func:`kernel_reward`): the milestone reward of the environment's evaluation ({-1, 1, 2, 3}
in ``profile`` mode; -1 or +1 in ``verify`` mode) against the row's ``problem`` (the problem's
source). A completion without a solution in either format is -1 (reason ``no_solution``). A sample
the environment could not judge (the service was full, a deadline passed, the harness failed) is
``None``: left out of the sample's reward, counted in ``kernel/unscorable``, and never scored as -1 or
+1 silently. A row whose problem does not load is a :class:`ShiftkitError` naming the row. Findings go
to ``samples.jsonl`` through TRL's ``log_extra`` (column ``kernel``).

**Dataset** (:func:`build_dataset`): rows with TRL's conventions, ``prompt`` (chat messages, or text)
plus the ``problem`` column (source) and ``problem_name``, from ``shiftkit agent synth`` output (its
``dataset.jsonl``), a directory of KernelBench-format problem files (``kernels import-kernelbench``
output, the fixtures) or a JSONL with ``code``/``problem`` fields.
"""

from __future__ import annotations

import json
import re
from pathlib import Path, PurePosixPath

from shiftkit.errors import ShiftkitError
from shiftkit.kernels.pool import SOURCE_SUFFIXES
from shiftkit.rewards import completion_text  # noqa: F401 - the completion's text, as every reward reads it

_FENCE = re.compile(r"^```[ \t]*([^\n`]*)\n(.*?)^```[ \t]*$", re.M | re.S)
_LANGS = {"python", "py", "cpp", "c++", "c", "cuda", "cu", "h", "hpp", "text", ""}


def _path_of(info: str) -> str | None:
    """The file an info string names (``python model_new.py``, ``cpp kernels/a.cpp``, ``kernels/a.cpp``)."""
    for w in info.strip().split():
        w = w.strip().removeprefix("file=").removeprefix("path=").strip("\"'")
        if w.lower() not in _LANGS and ("/" in w or "." in w):
            return w
    return None


def extract_solution(text: str) -> tuple[dict[str, str] | str | None, str]:
    """``(solution, why)``: a workspace ``{path: text}``, a single file's source, or None with the reason.

    Pure. A workspace is every fenced block whose info string names a file (the file names must be
    ``model_new.py``, ``<name>.py``, ``<name>.cpp`` ... or ``kernels/<name>.<ext>``; anything else, e.g. a
    path leaving the workspace, makes the answer invalid). Otherwise the last ``python`` block that
    defines ``ModelNew`` is the single file."""
    blocks = [(m.group(1).strip(), m.group(2)) for m in _FENCE.finditer(text or "")]
    named = [(p, body) for info, body in blocks if (p := _path_of(info))]
    if named:
        files: dict[str, str] = {}
        for p, body in named:
            pp = PurePosixPath(p)
            ok = not pp.is_absolute() and ".." not in pp.parts and (
                (len(pp.parts) == 1 and pp.suffix in (".py", *SOURCE_SUFFIXES))
                or (len(pp.parts) == 2 and pp.parts[0] == "kernels" and pp.suffix in SOURCE_SUFFIXES))
            if not ok:
                return None, f"workspace file {p!r} is not allowed (model_new.py, <name>.py or kernels/<name>.<ext>)"
            files[str(pp)] = body
        if "model_new.py" not in files:
            return None, "workspace answer without model_new.py"
        return files, f"workspace of {len(files)} files"
    py = [body for info, body in blocks if info.split()[:1] in (["python"], ["py"], []) and "ModelNew" in body]
    if py:
        return py[-1], "one fenced file"
    return None, "no fenced python block defining ModelNew and no named workspace files"


# ----------------------------------------------------------------------------- the prompt

BACKEND_WORDS = {"cpu": "C++ (CPU, OpenMP and SIMD allowed)", "cuda": "CUDA"}


def render_prompt(problem_source: str, backend: str = "cpu", chat: bool = True):
    """The single-turn prompt for a problem: chat messages (system + user) or one text."""
    if backend not in BACKEND_WORDS:
        raise ShiftkitError(f"unknown backend {backend!r}; valid: {', '.join(BACKEND_WORDS)}")
    system = (f"You write custom {BACKEND_WORDS[backend]} kernels that replace the PyTorch operators of a model to make it "
              "faster. Name the new model ModelNew, with the same constructor arguments and parameters as Model. Build "
              "kernels with shiftkit.kernels.runtime.load_c (extern \"C\" functions on raw pointers) or "
              "torch.utils.cpp_extension.load_inline, from static source strings. Inside ModelNew.forward only "
              "allocation and views of torch are allowed. The reward is -1 if the output is wrong, +1 if correct, +2 if "
              "more than 5% faster than eager PyTorch, +3 if also more than 5% faster than torch.compile.")
    user = ("Optimize this architecture:\n\n```python\n" + problem_source.rstrip() + "\n```\n\n"
            "Answer with one fenced ```python block holding the complete file that defines ModelNew, or with a "
            "workspace: one fenced block per file, the file named after the language (```python model_new.py, "
            "```cpp kernels/<name>.cpp).")
    if chat:
        return [{"role": "system", "content": system}, {"role": "user", "content": user}]
    return system + "\n\n" + user + "\n"


# ----------------------------------------------------------------------------- the reward

def _finding_codes(d: dict) -> list[str]:
    return [f["code"] for f in d.get("findings", []) if f.get("severity") == "error"]


def score(completions: list, problems: list[str], names: list[str] | None, env, mode: str = "profile",
          config: dict | None = None) -> tuple[list[float | None], list[dict]]:
    """Rewards and per-sample findings for completions against problem sources (the reward's core)."""
    names = list(names) if names is not None else ["problem"] * len(problems)
    reqs, idx, extra = [], [], []
    rewards: list[float | None] = []
    for i, (c, p) in enumerate(zip(completions, problems)):
        if not isinstance(p, str) or not p.strip():
            raise ShiftkitError(f"kernel reward: row {i} has no problem source (the 'problem' column holds the "
                                "KernelBench-format source; build rows with `shiftkit kernels dataset`)")
        sol, why = extract_solution(completion_text(c))
        if sol is None:
            rewards.append(-1.0)
            extra.append({"reward": -1.0, "reason": f"no_solution: {why}", "format": None})
            continue
        rewards.append(None)
        extra.append({"format": "workspace" if isinstance(sol, dict) else "file"})
        reqs.append((p, sol, mode, dict(config or {}), names[i] or "problem"))
        idx.append(i)
    for i, d in zip(idx, env.evaluate_many(reqs) if reqs else []):
        if "error" in d:
            if d.get("status") == 400:
                raise ShiftkitError(f"kernel reward: row {i} ({names[i]}): {d['error']}")
            extra[i] |= {"reward": None, "reason": f"unscorable: {d['error']}"}
            continue
        rewards[i] = float(d["reward"])
        extra[i] |= {"reward": rewards[i], "reason": d.get("reason", ""), "compiled": d.get("compiled"),
                     "correct": d.get("correct"), "codes": _finding_codes(d), "speedup_eager": d.get("speedup_eager"),
                     "speedup_compile": d.get("speedup_compile"), "inconclusive": d.get("inconclusive"),
                     "cached": bool(d.get("cached")), "solution": d.get("solution")}
    return rewards, extra


def make_kernel_reward(kernel_env_url: str = "", token: str = "", mode: str = "profile", config: dict | None = None,
                       slots: int = 0, env=None):
    """A ``kernel`` reward bound to an environment: a service (``kernel_env_url``), a local pool of
    ``slots`` children, or this process. ``mode``: ``profile`` (milestones) or ``verify`` (-1/+1)."""
    from shiftkit.kernels.envclient import make_env

    if mode not in ("profile", "verify"):
        raise ShiftkitError(f"kernel reward: mode must be profile or verify, got {mode!r}")
    env = env or make_env(kernel_env_url, token, slots=slots)

    def kernel(prompts, completions, problem, problem_name=None, log_extra=None, log_metric=None, **kwargs):
        rewards, extra = score(completions, problem, problem_name, env, mode, config)
        if log_extra is not None:
            log_extra("kernel", extra)
        if log_metric is not None and rewards:
            log_metric("kernel/unscorable", sum(r is None for r in rewards) / len(rewards))
            ok = [e for e in extra if e.get("reward") is not None]
            for lvl in (-1.0, 1.0, 2.0, 3.0):
                log_metric(f"kernel/frac_{int(lvl):+d}", sum(e["reward"] == lvl for e in ok) / max(1, len(ok)))
        return rewards

    kernel.env = env
    return kernel


_CONFIGURED: list = []


def configure(kernel_env_url: str = "", token: str = "", mode: str = "profile", config: dict | None = None,
              slots: int = 0):
    """Bind :func:`kernel_reward` (the registered ``kernel`` reward) for this process: a served environment
    (``kernel_env_url``), a local pool (``slots``) or this process; ``mode`` and EvalConfig overrides.
    Returns the bound function. A loop calls this once from its config before training."""
    old = _CONFIGURED[:]
    _CONFIGURED[:] = [make_kernel_reward(kernel_env_url, token, mode, config, slots)]
    for fn in old:
        fn.env.close()
    return _CONFIGURED[0]


def bound_env():
    """The environment :func:`configure` bound (else the process-wide in-process one)."""
    from shiftkit.kernels.envclient import default_env

    return _CONFIGURED[0].env if _CONFIGURED else default_env()


def kernel_reward(prompts, completions, problem, problem_name=None, log_extra=None, log_metric=None, **kwargs):
    """TRL-signature ``kernel`` reward: the environment bound by :func:`configure`, else this process in
    ``profile`` mode (the milestones)."""
    from shiftkit.kernels.envclient import default_env

    fn = _CONFIGURED[0] if _CONFIGURED else make_kernel_reward(env=default_env())
    return fn(prompts, completions, problem, problem_name, log_extra, log_metric, **kwargs)


# ----------------------------------------------------------------------------- the dataset

_IDENT = re.compile(r"[^A-Za-z0-9_]")


def _name(s: str) -> str:
    n = _IDENT.sub("_", s)[:64] or "problem"
    return n if not n[0].isdigit() else "p_" + n[:61]


def load_problem_rows(source: str | Path) -> list[dict]:
    """``{"problem_name", "problem", "data_source"}`` rows from synth output, a problem directory or a JSONL."""
    src = Path(source)
    if src.is_dir() and (src / "dataset.jsonl").is_file():
        src = src / "dataset.jsonl"
    rows = []
    if src.is_dir():
        files = sorted(f for f in src.glob("*.py") if not f.name.startswith("_"))
        if not files:
            raise ShiftkitError(f"kernels dataset: {src} has no problem .py files and no dataset.jsonl")
        for f in files:
            rows.append({"problem_name": _name(f.stem), "problem": f.read_text(), "data_source": f"file:{f.name}"})
    elif src.is_file() and src.suffix == ".jsonl":
        from shiftkit.data import _jsonl

        raw = _jsonl(src)
        for k, d in enumerate(raw.rows):
            code = d.get("code") or d.get("problem")
            if not isinstance(code, str):
                raise ShiftkitError(f"kernels dataset: {raw.where(k)} has no 'code' or 'problem' source field")
            rows.append({"problem_name": _name(str(d.get("id") or d.get("problem_name") or f"row{k + 1}")), "problem": code,
                         "data_source": str(d.get("data_source", "jsonl"))})
    else:
        raise ShiftkitError(f"kernels dataset: {src} is not a synth output directory, a problem directory or a .jsonl")
    for r in rows:
        if "class Model" not in r["problem"] or "def get_inputs" not in r["problem"]:
            raise ShiftkitError(f"kernels dataset: {r['problem_name']} is not a KernelBench-format problem "
                                "(class Model, get_inputs, get_init_inputs)")
    return rows


def build_dataset(source: str | Path, out: str | Path, backend: str = "cpu", chat: bool = True) -> dict:
    """Write TRL-style rows (``prompt``, ``problem``, ``problem_name``, ``data_source``) to ``out`` (JSONL)."""
    from shiftkit.io import atomic_write_text

    rows = load_problem_rows(source)
    lines = [json.dumps({"prompt": render_prompt(r["problem"], backend, chat), **r}) for r in rows]
    atomic_write_text(out, "\n".join(lines) + "\n")
    return {"rows": len(rows), "out": str(out), "source": str(source), "format": "chat" if chat else "text"}
