"""The import layering, read from the source (every ``import`` statement, at any depth, so an import
inside a function counts as much as one at the top of a file):

* the core (the flat modules and ``tasks/``) is in ranks: the module table of ``shiftkit/__init__.py``
  (:func:`core_ranks` reads it; every core module must be in it). A core module imports only from its
  own rank or a lower one;
* the core imports no method package and no recipe;
* ``kernels/`` (the environment) imports nothing from ``agent/``;
* no method package imports another one, except ``agent/`` which may use ``kernels/``;
* only the CLI (``shiftkit/cli.py``) imports ``shiftkit.recipes``;
* the module graph has no cycle (:func:`cycles`).

``integrations/`` (adapters of the methods to other frameworks, e.g. TRL) sits beside the methods: it may
import them, nothing imports it but recipes and the CLI. The CLI modules (``shiftkit/cli.py`` and
``<package>/cli.py``) only assemble the command line.

An import names the module it loads: ``from shiftkit.kernels import jail`` is an edge to
``shiftkit.kernels.jail``, not to the package ``shiftkit.kernels`` (Python runs a package's
``__init__`` before any of its modules; that is no dependency of the importer on the package's
other modules).
"""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "shiftkit"
METHODS = ("opd", "sar", "kernels", "agent")
MAY_USE = {"agent": {"kernels"}, "integrations": set(METHODS)}  # room -> the method packages it may import
# Cycles being removed elsewhere; each line names its issue. The lead deletes a line when that work lands.
KNOWN_CYCLES: list[set[str]] = []  # none left (issue 17 removed kernels.build <-> kernels.runtime)


def module_files(root: Path = ROOT) -> dict[str, Path]:
    """Every shiftkit module (dotted name -> file), the kernel fixture files (problems, not code) left out."""
    out = {}
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root.parent)
        if "fixtures" not in rel.parts:
            out[".".join(rel.with_suffix("").parts).removesuffix(".__init__")] = path
    return out


def imported_modules(path: Path, root: Path = ROOT, known: set[str] | None = None) -> list[tuple[int, str]]:
    """(line, module) for every import in ``path``, relative imports resolved. ``from a import b`` names
    ``a.b`` when that is a module (``known``), else ``a``."""
    pkg = list(path.relative_to(root.parent).with_suffix("").parts[:-1])
    known = known if known is not None else set(module_files(root))
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(pkg[: len(pkg) - node.level + 1] + ([base] if base else []))
            subs = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in known]
            plain = len(subs) < len(node.names)  # some names are attributes of ``base`` itself
            out += [(node.lineno, m) for m in ([base] if plain else []) + subs]
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


def core_ranks(root: Path = ROOT) -> dict[str, int]:
    """The module table of ``shiftkit/__init__.py``: ``shiftkit.<module>`` -> its rank (a package
    listed as ``tasks/`` ranks every module in it)."""
    doc = ast.get_docstring(ast.parse((root / "__init__.py").read_text())) or ""
    ranks, rank = {}, None
    for line in doc.splitlines():
        if m := re.match(r"Rank (\d+)\b", line):
            rank = int(m.group(1))
        elif rank is not None and (m := re.match(r"  (\w+)(\.py|/)\s", line)):
            ranks[f"shiftkit.{m.group(1)}"] = rank
    return ranks


def rank_of(module: str, ranks: dict[str, int]) -> int | None:
    while module and module not in ranks:
        module = module.rpartition(".")[0]
    return ranks.get(module)


def violations(root: Path = ROOT) -> list[str]:
    bad = []
    files = module_files(root)
    ranks = core_ranks(root)
    for mod, path in files.items():
        rel = path.relative_to(root.parent)
        src_room = room_of(mod)
        is_cli = src_room == "cli" or rel.name == "cli.py"
        if src_room == "core" and mod != "shiftkit" and rank_of(mod, ranks) is None:
            bad.append(f"{rel} has no rank (add it to the module table in shiftkit/__init__.py)")
        seen = set()
        for line, target in imported_modules(path, root, set(files)):
            dst = room_of(target)
            if dst is None or target == mod or (line, target) in seen:
                continue
            seen.add((line, target))  # one report per import statement and module
            where = f"{rel}:{line} imports {target}"
            if src_room == "core" and dst == "core":
                r_src, r_dst = rank_of(mod, ranks), rank_of(target, ranks)
                if None not in (r_src, r_dst) and r_dst > r_src:
                    bad.append(f"{where} (rank {r_src} imports rank {r_dst}: a module imports only from its "
                               "own rank or lower ones)")
            elif dst == src_room or dst == "core":
                continue
            elif dst == "recipes":
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


def cycles(root: Path = ROOT) -> list[set[str]]:
    """The strongly connected components of more than one module of the import graph (Tarjan)."""
    files = module_files(root)
    graph = {m: {t for _, t in imported_modules(p, root, set(files)) if t in files and t != m}
             for m, p in files.items()}
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):  # iterative enough for this graph's depth (a few dozen)
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on.discard(w)
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(comp)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_layering_holds():
    assert violations() == []


def test_every_core_module_has_a_rank_and_the_table_names_real_modules():
    ranks = core_ranks()
    files = module_files()
    assert len(ranks) >= 20 and set(ranks.values()) == set(range(6)), ranks
    assert [m for m in ranks if m not in files] == []  # no stale row


def test_the_import_graph_has_no_cycle():
    assert [sorted(c) for c in cycles() if c not in KNOWN_CYCLES] == []


def function_level_imports(root: Path = ROOT) -> list[str]:
    """Core modules' shiftkit imports inside a function (a core module lists what it uses at its top;
    function-level imports are for optional third-party dependencies and the CLI's lazy loading)."""
    ranks, files, out = core_ranks(root), module_files(root), []
    for mod, path in files.items():
        if rank_of(mod, ranks) is None:
            continue
        for fn in ast.walk(ast.parse(path.read_text())):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                out += [f"{path.relative_to(root.parent)}:{n.lineno}" for n in ast.walk(fn)
                        if isinstance(n, ast.ImportFrom) and (n.module or "").startswith("shiftkit")
                        or isinstance(n, ast.Import) and any(a.name.startswith("shiftkit") for a in n.names)]
    return out


def test_the_core_imports_shiftkit_only_at_the_top():
    assert function_level_imports() == []


def test_a_violation_is_caught(tmp_path):
    """The checker itself: a kernels module importing the agent, a core module importing a recipe and a
    method package, an upward import inside a function (rank 0 -> rank 5), an unranked core module, a
    cycle through a function-level import, and the core's function-level imports."""
    pkg = tmp_path / "shiftkit"
    (pkg / "kernels").mkdir(parents=True)
    (pkg / "__init__.py").write_text('"""table\n\nRank 0, foundation\n\n  errors.py   e\n\nRank 5, loops\n\n'
                                     '  rl.py       r\n  sft.py      s\n"""\n')
    (pkg / "kernels" / "x.py").write_text("def f():\n    from shiftkit.agent.clients import ModelError\n")
    (pkg / "rl.py").write_text("from shiftkit.recipes import demo\nfrom shiftkit.opd import loop\n"
                               "from shiftkit import sft\n")
    (pkg / "sft.py").write_text("def g():\n    from shiftkit import rl\n")
    (pkg / "errors.py").write_text("def h():\n    from shiftkit.rl import x\n")
    (pkg / "extra.py").write_text("")
    (pkg / "recipes").mkdir()
    (pkg / "recipes" / "demo.py").write_text("from shiftkit.kernels import x\n")  # recipes may import anything
    found = violations(pkg)
    assert len(found) == 5, found
    assert any("kernels/x.py:2 imports shiftkit.agent.clients" in v for v in found)
    assert any("rl.py:1 imports shiftkit.recipes" in v for v in found)
    assert any("rl.py:2 imports shiftkit.opd" in v for v in found)
    assert any("errors.py:2 imports shiftkit.rl (rank 0 imports rank 5" in v for v in found)
    assert any("extra.py has no rank" in v for v in found)
    assert [sorted(c) for c in cycles(pkg)] == [["shiftkit.rl", "shiftkit.sft"]]  # sft -> rl inside a function
    assert function_level_imports(pkg) == ["shiftkit/errors.py:2", "shiftkit/sft.py:2"]
