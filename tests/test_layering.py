"""The import layering, read from the source (every ``import`` statement, at any depth):

* the core (the flat modules and ``tasks/``) imports no method package and no recipe;
* ``kernels/`` (the environment) imports nothing from ``agent/``;
* no method package imports another one, except ``agent/`` which may use ``kernels/``;
* only the CLI (``shiftkit/cli.py``) imports ``shiftkit.recipes``.

``integrations/`` (adapters of the methods to other frameworks, e.g. TRL) sits beside the methods: it may
import them, nothing imports it but recipes and the CLI. The CLI modules (``shiftkit/cli.py`` and
``<package>/cli.py``) only assemble the command line.
"""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "shiftkit"
METHODS = ("opd", "sar", "kernels", "agent")
MAY_USE = {"agent": {"kernels"}, "integrations": set(METHODS)}  # room -> the method packages it may import


def imported_modules(path: Path, root: Path = ROOT) -> list[tuple[int, str]]:
    """(line, module) for every import in ``path``, relative imports resolved."""
    pkg = list(path.relative_to(root.parent).with_suffix("").parts[:-1])
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(pkg[: len(pkg) - node.level + 1] + ([base] if base else []))
            out += [(node.lineno, base)] + [(node.lineno, f"{base}.{a.name}") for a in node.names]
    return out


def room_of(module: str) -> str | None:
    """'core', a method package name, 'recipes' or 'cli' for a shiftkit module; None outside shiftkit."""
    parts = module.split(".")
    if parts[0] != "shiftkit":
        return None
    if len(parts) == 1:
        return "core"
    if parts[1] in ("cli", "__main__"):
        return "cli"
    if parts[1] in (*METHODS, "recipes", "integrations"):
        return parts[1]
    return "core"


def violations(root: Path = ROOT) -> list[str]:
    bad = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root.parent)
        if "fixtures" in rel.parts:  # kernel problem/solution files, not library code
            continue
        mod = ".".join(rel.with_suffix("").parts).removesuffix(".__init__")
        src_room = room_of(mod)
        is_cli = src_room == "cli" or rel.name == "cli.py"
        seen = set()
        for line, target in imported_modules(path, root):
            dst = room_of(target)
            if dst is None or dst == src_room or dst == "core" or (line, dst) in seen:
                continue
            seen.add((line, dst))  # one report per import statement and room
            where = f"{rel}:{line} imports {target}"
            if dst == "recipes":
                if src_room != "cli":
                    bad.append(f"{where} (only shiftkit/cli.py may import recipes)")
            elif src_room == "core" and dst in METHODS:
                bad.append(f"{where} (the core imports no method package)")
            elif src_room in (*METHODS, "integrations") and dst in METHODS and dst not in MAY_USE.get(src_room, set()):
                bad.append(f"{where} ({src_room}/ may not import {dst}/)")
            elif dst == "integrations" and src_room not in ("cli", "recipes"):
                bad.append(f"{where} (only recipes and the CLI use integrations/)")
            elif dst == "cli" and not is_cli:
                bad.append(f"{where} (library code does not import the CLI)")
    return bad


def test_the_layering_holds():
    assert violations() == []


def test_a_violation_is_caught(tmp_path):
    """The checker itself: a kernels module importing the agent, and a core module importing a recipe."""
    pkg = tmp_path / "shiftkit"
    (pkg / "kernels").mkdir(parents=True)
    (pkg / "kernels" / "x.py").write_text("def f():\n    from shiftkit.agent.clients import ModelError\n")
    (pkg / "rl.py").write_text("from shiftkit.recipes import demo\nfrom shiftkit.opd import loop\n")
    (pkg / "recipes").mkdir()
    (pkg / "recipes" / "demo.py").write_text("from shiftkit import rl\n")  # recipes may import anything
    found = violations(pkg)
    assert len(found) == 3, found
    assert any("kernels/x.py:2 imports shiftkit.agent" in v for v in found)
    assert any("rl.py:1 imports shiftkit.recipes" in v for v in found)
    assert any("rl.py:2 imports shiftkit.opd" in v for v in found)
