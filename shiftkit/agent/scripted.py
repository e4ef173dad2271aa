"""A scripted policy for the kernel agent: deterministic tool calls that write a known solution with an
injected compile error, compile, read the structured error, fix it with ``edit_file``, compile, verify,
profile and finish. It drives the real loop and the real kernel environment end to end (tests, demo,
``shiftkit agent run --model scripted``, ``bench --model scripted``), and its trajectories feed
the RL mechanics step. It is an oracle for the harness, not a model.
"""

from __future__ import annotations

import json
from pathlib import Path

from shiftkit.agent.clients import ScriptedClient, call, say
from shiftkit.errors import ShiftkitError

INJECT_MARK = "int injected_error = undeclared_symbol_xyz;"


def known_solution_files(problem_name: str, solutions_dir: str | Path | None = None) -> dict[str, str]:
    """Workspace files of a known-correct solution: ``<dir>/<problem>/workspace/*`` or ``<dir>/<problem>/correct.py``
    (a single-file solution becomes ``model_new.py``). Defaults to the kernel fixtures."""
    from shiftkit.kernels.fixtures import SOLUTIONS

    base = Path(solutions_dir or SOLUTIONS) / problem_name
    if (base / "workspace").is_dir():
        root = base / "workspace"
        return {str(p.relative_to(root)): p.read_text() for p in sorted(root.rglob("*"))
                if p.is_file() and "build" not in p.parts and "__pycache__" not in p.parts}
    for cand in (base / "correct.py", base.with_suffix(".py")):
        if cand.is_file():
            return {"model_new.py": cand.read_text()}
    raise ShiftkitError(f"no known solution for {problem_name!r} under {base.parent} (<problem>/correct.py or <problem>/workspace/)")


def inject_compile_error(files: dict[str, str]) -> tuple[dict[str, str], tuple[str, str, str]]:
    """Insert an undeclared identifier into the first ``extern "C"`` function; returns the broken files and
    the ``(path, broken_text, fixed_text)`` edit that repairs it."""
    for path, text in files.items():
        i = text.find('extern "C"')
        if i < 0:
            continue
        j = text.find("{", i)
        k = text.find("\n", j)
        old = text[j:k]
        new = old + " " + INJECT_MARK
        broken = dict(files)
        broken[path] = text[:j] + new + text[k:]
        return broken, (path, new, old)
    raise ShiftkitError("no extern \"C\" function to inject an error into")


def _last_tool_json(messages: list[dict]) -> dict:
    for m in reversed(messages):
        if m["role"] == "tool":
            try:
                return json.loads(m["content"])
            except json.JSONDecodeError:
                return {}
    return {}


def kernel_fix_script(files: dict[str, str], inject: bool = True, profile: bool = True) -> ScriptedClient:
    broken, (epath, bad, good) = inject_compile_error(files) if inject else (files, ("", "", ""))
    writes = [call("write_file", path=p, content=t) for p, t in sorted(broken.items(), key=lambda kv: kv[0] == "model_new.py")]

    def fix(messages):
        obs = _last_tool_json(messages)
        if obs.get("compiled") is False and inject:
            errs = obs.get("compile_errors") or [{}]
            e = errs[0]
            return say(f"Compile error at {e.get('file')}:{e.get('line')}: {e.get('message')}. Fixing it.",
                       call("edit_file", path=epath, old_text=bad, new_text=good))
        return say("It compiled.", call("list_files"))

    steps = [
        say("Let me look at the workspace and the reference.", call("list_files"), call("read_file", path="model.py")),
        say("Writing a fused kernel and ModelNew.", *writes),
        say("Compiling.", call("compile")),
        fix,
        say("Compiling again.", call("compile")),
        say("Checking correctness.", call("verify")),
    ]
    if profile:
        steps.append(say("Timing against eager and torch.compile.", call("profile")))
    steps.append(say("Done.", call("finish", summary="fused single-pass kernel")))
    return ScriptedClient(steps, name="scripted:kernel_fix")
