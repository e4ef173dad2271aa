"""Agent tools in the OpenAI function-calling format, and the registry they live in.

A tool is a Python function ``fn(ctx, **arguments) -> ToolResult`` plus its JSON-Schema ``parameters``;
``@tool(...)`` registers it in :data:`TOOLS` (the extension point: add a tool = add one decorated
function). :func:`get_tool` raises on unknown names. :func:`call_tool` validates the arguments against
the schema, runs the tool under a wall-clock limit and turns every failure into an observation, so a
bad call never ends the episode: the model sees the error and may try again.

The kernel tools call the kernel environment: ``compile`` -> :func:`shiftkit.kernels.compile_only`,
``verify`` -> ``evaluate(profile=False)``, ``profile`` -> ``evaluate(profile=True)``, in process, or through
``ToolContext.env`` (a :class:`shiftkit.kernels.envclient.KernelEnv`, e.g. a ``kernels serve`` service)
with the same request. Results are cached per solution content hash within an episode (re-verifying
unchanged sources costs nothing).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from shiftkit.agent.workspace import ReadOnly, SandboxViolation, Workspace

MAX_OBSERVATION_CHARS = 6000


class Unjudged(RuntimeError):
    """The kernel environment could not judge a request: the service unreachable, full or past its deadline,
    or its harness failed. Not the candidate's fault: a final evaluation that raises it is unscorable."""


@dataclass
class ToolResult:
    ok: bool
    observation: str  # what the model sees (the tool message content)
    data: dict = field(default_factory=dict)  # structured, for the trajectory
    reward: float | None = None  # verify/profile: the environment's reward for the current sources
    finish: bool = False
    kind: str = "ok"  # ok | error | malformed | sandbox_violation | read_only | timeout | unknown_tool


@dataclass
class ToolContext:
    workspace: Workspace
    problem: Any  # shiftkit.kernels.Problem
    eval_config: Any  # shiftkit.kernels.EvalConfig (profile is set per tool)
    cache: dict = field(default_factory=dict)  # (mode, solution hash) -> result dict
    last_eval: dict | None = None  # the latest verify/profile result (for the final reward)
    env: Any = None  # a shiftkit.kernels.envclient.KernelEnv (e.g. a served environment); None: in process


@dataclass
class Tool:
    name: str
    description: str
    parameters: dict
    fn: Callable[..., ToolResult]
    timeout_s: float | None = None  # None: the episode's default tool timeout

    def schema(self) -> dict:
        return {"type": "function", "function": {"name": self.name, "description": self.description,
                                                 "parameters": self.parameters}}


TOOLS: dict[str, Tool] = {}
DEFAULT_TOOLS = ("list_files", "read_file", "write_file", "edit_file", "compile", "verify", "profile", "finish")


def tool(name: str, description: str, properties: dict | None = None, required: tuple[str, ...] = (),
         timeout_s: float | None = None):
    def deco(fn):
        if name in TOOLS:
            raise ValueError(f"tool {name!r} is already registered")
        params = {"type": "object", "properties": properties or {}, "required": list(required),
                  "additionalProperties": False}
        TOOLS[name] = Tool(name, description, params, fn, timeout_s)
        return fn
    return deco


def get_tool(name: str) -> Tool:
    if name not in TOOLS:
        raise KeyError(f"unknown tool {name!r}; known: {', '.join(sorted(TOOLS))}")
    return TOOLS[name]


def tool_schemas(names=DEFAULT_TOOLS) -> list[dict]:
    return [get_tool(n).schema() for n in names]


# ----------------------------------------------------------------------------- argument checking

_PY_TYPES = {"string": str, "integer": int, "number": (int, float), "boolean": bool, "object": dict, "array": list}


def check_arguments(params: dict, args: Any) -> str | None:
    """Pure: why ``args`` does not match the tool's parameter schema, or None."""
    if not isinstance(args, dict):
        return f"arguments must be a JSON object, got {type(args).__name__}"
    props = params.get("properties", {})
    missing = [k for k in params.get("required", []) if k not in args]
    if missing:
        return f"missing required argument(s): {', '.join(missing)}"
    extra = [k for k in args if k not in props]
    if extra and params.get("additionalProperties", True) is False:
        return f"unknown argument(s): {', '.join(extra)}; expected: {', '.join(props) or 'none'}"
    for k, v in args.items():
        want = props[k].get("type")
        tp = _PY_TYPES.get(want)
        if tp and (not isinstance(v, tp) or (want in ("integer", "number") and isinstance(v, bool))):
            return f"argument {k!r} must be {want}, got {type(v).__name__}"
    return None


def parse_arguments(raw: Any) -> tuple[dict | None, str | None]:
    """OpenAI sends ``arguments`` as a JSON string; accept a dict too."""
    if isinstance(raw, dict):
        return raw, None
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return {}, None
    if not isinstance(raw, str):
        return None, f"arguments must be a JSON string, got {type(raw).__name__}"
    try:
        v = json.loads(raw)
    except json.JSONDecodeError as e:
        return None, f"arguments are not valid JSON ({e.msg} at char {e.pos})"
    return (v, None) if isinstance(v, dict) else (None, "arguments must be a JSON object")


def call_tool(ctx: ToolContext, name: str, raw_args: Any, allowed=DEFAULT_TOOLS, timeout_s: float = 300.0) -> ToolResult:
    """Validate and run one tool call; every failure becomes an observation."""
    if name not in allowed or name not in TOOLS:
        return ToolResult(False, f"error: unknown tool {name!r}. Available tools: {', '.join(allowed)}.", kind="unknown_tool")
    t = get_tool(name)
    args, err = parse_arguments(raw_args)
    if err is None:
        err = check_arguments(t.parameters, args)
    if err is not None:
        return ToolResult(False, f"error: malformed call to {name}: {err}", {"arguments": raw_args}, kind="malformed")
    limit = t.timeout_s or timeout_s
    box: dict = {}

    def run():
        try:
            box["r"] = t.fn(ctx, **args)
        except SandboxViolation as e:
            box["r"] = ToolResult(False, f"error: {e} (the workspace is the only place you can touch)", kind="sandbox_violation")
        except ReadOnly as e:
            box["r"] = ToolResult(False, f"error: {e}", kind="read_only")
        except (FileNotFoundError, ValueError) as e:
            box["r"] = ToolResult(False, f"error: {e}", kind="error")
        except Exception as e:  # noqa: BLE001 - a tool bug must not end the episode
            box["r"] = ToolResult(False, f"error: tool {name} failed: {type(e).__name__}: {e}", kind="error")

    th = threading.Thread(target=run, daemon=True, name=f"tool-{name}")
    th.start()
    th.join(limit)
    if th.is_alive():  # the thread cannot be killed; the kernel env's own worker timeouts end real work
        return ToolResult(False, f"error: tool {name} timed out after {limit:g} s; the episode continues", kind="timeout")
    r = box["r"]
    if len(r.observation) > MAX_OBSERVATION_CHARS:
        r.observation = r.observation[:MAX_OBSERVATION_CHARS] + f"\n... [truncated {len(r.observation) - MAX_OBSERVATION_CHARS} chars]"
    return r


# ----------------------------------------------------------------------------- file tools

@tool("list_files", "List the files in the workspace (or a sub-directory) with size and rw/ro mode.",
      {"path": {"type": "string", "description": "directory relative to the workspace (default '.')"}})
def _list_files(ctx: ToolContext, path: str = ".") -> ToolResult:
    files = ctx.workspace.list(path)
    lines = [f"{f['mode']} {f['bytes']:>7d}  {f['path']}" for f in files]
    return ToolResult(True, "\n".join(lines) or "(empty)", {"files": files})


@tool("read_file", "Read a text file from the workspace, optionally a line range (1-based, inclusive).",
      {"path": {"type": "string"}, "start_line": {"type": "integer"}, "end_line": {"type": "integer"}}, ("path",))
def _read_file(ctx: ToolContext, path: str, start_line: int = 1, end_line: int = 0) -> ToolResult:
    lines = ctx.workspace.read(path).splitlines()
    end = end_line if end_line > 0 else len(lines)
    sel = lines[max(0, start_line - 1):end]
    return ToolResult(True, "\n".join(sel), {"path": path, "lines": [start_line, min(end, len(lines))]})


@tool("write_file", "Create or overwrite a writable file: model_new.py or kernels/<name>.(cpp|c|h|cu|...).",
      {"path": {"type": "string"}, "content": {"type": "string"}}, ("path", "content"))
def _write_file(ctx: ToolContext, path: str, content: str) -> ToolResult:
    ctx.workspace.write(path, content)
    return ToolResult(True, f"wrote {path} ({len(content.splitlines())} lines)", {"path": path, "bytes": len(content.encode())})


@tool("edit_file", "Replace the unique occurrence of old_text with new_text in a writable file.",
      {"path": {"type": "string"}, "old_text": {"type": "string"}, "new_text": {"type": "string"}},
      ("path", "old_text", "new_text"))
def _edit_file(ctx: ToolContext, path: str, old_text: str, new_text: str) -> ToolResult:
    line = ctx.workspace.edit(path, old_text, new_text)
    return ToolResult(True, f"edited {path} at line {line}", {"path": path, "line": line})


# ----------------------------------------------------------------------------- kernel tools

def _solution(ctx: ToolContext):
    from shiftkit.kernels import load_solution

    if not ctx.workspace.has_solution():
        raise FileNotFoundError("model_new.py does not exist yet: write it first")
    return load_solution(ctx.workspace.root, ctx.eval_config.backend)


def _summarize(d: dict, mode: str) -> dict:
    keep = {"compiled": d["compiled"], "correct": d["correct"], "reward": d["reward"], "reason": d["reason"],
            "findings": [{k: f[k] for k in ("code", "severity", "message", "where") if f.get(k)} for f in d["findings"]],
            "compile_errors": d["compile_errors"][:10]}
    if mode == "profile":
        keep["speedup_eager"] = d.get("speedup_eager")
        keep["speedup_compile"] = d.get("speedup_compile")
        keep["median_ms"] = {k: round(t["median_ms"], 4) for k, t in d.get("timings", {}).items() if "median_ms" in t}
    if d.get("max_abs_diff") is not None and mode != "compile":
        keep["max_abs_diff"] = d["max_abs_diff"]
    return keep


def run_env(ctx: ToolContext, mode: str) -> dict:
    """compile | verify | profile on the workspace's current sources, cached by solution hash."""
    import dataclasses

    from shiftkit.kernels import compile_only, evaluate

    sol = _solution(ctx)
    key = (mode, sol.hash)
    if key not in ctx.cache and ctx.env is not None:
        ctx.cache[key] = _run_on_env(ctx, sol, mode)
    if key not in ctx.cache:
        if mode == "compile":
            res = compile_only(ctx.problem, sol, ctx.eval_config)
        else:
            cfg = dataclasses.replace(ctx.eval_config, profile=(mode == "profile"))
            res = evaluate(ctx.problem, sol, cfg)
        d = res.to_dict()
        d.pop("builds", None)
        for t in d.get("timings", {}).values():
            t.pop("times_ms", None)
        ctx.cache[key] = _summarize(d, mode) | {"solution_hash": sol.hash, "seconds": round(res.seconds, 3)}
    return ctx.cache[key]


def workspace_files(ctx: ToolContext) -> dict[str, str]:
    """The workspace's files as the in-process evaluation reads them: every top-level ``.py`` (``model_new.py``
    and the read-only ``model.py`` copy, which a solution may import) and ``kernels/*`` sources."""
    from shiftkit.kernels.pool import SOURCE_SUFFIXES

    root = ctx.workspace.root
    out = {}
    for f in sorted(root.rglob("*")):
        rel = f.relative_to(root)
        if not f.is_file() or "build" in rel.parts:
            continue
        if (len(rel.parts) == 1 and f.suffix == ".py") or (rel.parts[0] == "kernels" and f.suffix in SOURCE_SUFFIXES):
            out[str(rel)] = f.read_text(errors="replace")
    return out


def _run_on_env(ctx: ToolContext, sol, mode: str) -> dict:
    """compile | verify | profile through a :class:`KernelEnv` (``kernel_env_url``): the same request the
    in-process path evaluates, sent as the problem's source and the workspace's files."""
    import dataclasses

    from shiftkit.kernels import EvalConfig
    from shiftkit.kernels.pool import CLIENT_FIELDS

    default = EvalConfig()
    over = {f.name: getattr(ctx.eval_config, f.name) for f in dataclasses.fields(EvalConfig)
            if f.name in CLIENT_FIELDS and getattr(ctx.eval_config, f.name) != getattr(default, f.name)}
    from shiftkit.errors import ShiftkitError

    try:
        d = ctx.env.evaluate(ctx.problem.source, workspace_files(ctx), mode, over, ctx.problem.name)
    except ShiftkitError as e:  # unreachable, or the token refused
        raise Unjudged(str(e)) from None
    if "error" in d:
        if d.get("status") == 400:  # the request itself is wrong (e.g. a file name the environment refuses)
            raise ValueError(f"the kernel environment refused this request: {d['error']}")
        raise Unjudged(f"the kernel environment could not judge this ({d.get('status')}): {d['error']}")
    return _summarize(d, mode) | {"solution_hash": sol.hash, "seconds": round(float(d.get("seconds", 0.0)), 3)}


def _env_tool(ctx: ToolContext, mode: str) -> ToolResult:
    d = run_env(ctx, mode)
    if mode != "compile":
        ctx.last_eval = d | {"mode": mode}
    shown = {k: v for k, v in d.items() if k not in ("solution_hash", "seconds")}
    if mode == "compile":
        shown = {k: shown[k] for k in ("compiled", "reason", "compile_errors", "findings")}
    ok = d["compiled"] if mode == "compile" else d["correct"]
    return ToolResult(ok, json.dumps(shown, indent=1, ensure_ascii=False), d, reward=None if mode == "compile" else float(d["reward"]))


@tool("compile", "Build the workspace's kernels (static checks + compile). Returns structured compile errors.")
def _compile(ctx: ToolContext) -> ToolResult:
    return _env_tool(ctx, "compile")


@tool("verify", "Compile and check ModelNew against the reference on fresh inputs (no timing). Returns correctness, findings and the reward.")
def _verify(ctx: ToolContext) -> ToolResult:
    return _env_tool(ctx, "verify")


@tool("profile", "Compile, verify and time ModelNew against eager PyTorch and torch.compile. Returns speedups and the reward.")
def _profile(ctx: ToolContext) -> ToolResult:
    return _env_tool(ctx, "profile")


@tool("finish", "End the episode. The current workspace sources are evaluated for the final reward.",
      {"summary": {"type": "string", "description": "one paragraph: what you built"}})
def _finish(ctx: ToolContext, summary: str = "") -> ToolResult:
    return ToolResult(True, "episode finished", {"summary": summary}, finish=True)

