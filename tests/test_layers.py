"""The layers of docs/architecture.md, read off the source with ``ast`` (nothing is imported):
no import cycle at module level, no import reaching up a layer (outside :data:`ALLOWED_UP`),
and every function-local import (the plugin's own modules, the standard library's and third
parties' alike) saying why it is local."""

from __future__ import annotations

import ast
import functools
import io
import re
import tokenize
from pathlib import Path
from typing import Dict, List, NamedTuple, Optional, Sequence, Set, Tuple

REPO = Path(__file__).resolve().parents[1]

#: bottom to top, as docs/architecture.md lists them; a module's layer is its longest prefix here
LAYERS: Dict[str, int] = {
    "mvssl_plugin.losses": 0,
    "mvssl_plugin.backbones": 0,
    "mvssl_plugin": 1,  # the package itself and its root files (beta_rule, runs, errors, ...)
    "mvssl_plugin.config": 2,
    "mvssl_plugin.data": 3,
    "mvssl_plugin.methods": 4,
    "mvssl_plugin.registry": 5,
    "mvssl_plugin.eval": 6,
    "mvssl_plugin.encoder": 7,
    "mvssl_plugin.train": 8,
    "mvssl_plugin.cli": 9,
    "mvssl_plugin_autoregister": 10,
    "main": 11,  # main_*.py
}

#: (importer, imported): the imports allowed to point up a layer, each with its reason
ALLOWED_UP: Dict[Tuple[str, str], str] = {
    ("mvssl_plugin", "mvssl_plugin.registry"): "mvssl_plugin.register, an attribute loaded on first use (PEP 562)",
    ("mvssl_plugin", "mvssl_plugin.encoder.model"): "mvssl_plugin.load_encoder, an attribute loaded on first use",
    ("mvssl_plugin.methods", "mvssl_plugin_autoregister"): "hooks_held(): the bridge's hooks wait while the "
    "methods import solo-learn (docs/architecture.md, 'Two details'); the bridge is standard library",
}

#: a function-local import (of any module) needs a comment like this one, within the two lines
#: above it (or above the first import of its group) or on its own line
LOCAL_REASON = re.compile(r"#\s*local\b")


class Import(NamedTuple):
    importer: str
    imported: str
    line: int
    end_line: int
    local: bool  # inside a function: runs when called, not at import
    group_start: int  # first line of the run of import statements it belongs to


def module_files() -> Dict[str, Path]:
    files = {}
    for path in sorted((REPO / "mvssl_plugin").rglob("*.py")):
        parts = list(path.relative_to(REPO).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        files[".".join(parts)] = path
    files["mvssl_plugin_autoregister"] = REPO / "mvssl_plugin_autoregister.py"
    for path in sorted(REPO.glob("main_*.py")):
        files[path.stem] = path
    return files


def is_own(name: str) -> bool:
    return name == "mvssl_plugin" or name.startswith("mvssl_plugin.") or name == "mvssl_plugin_autoregister"


def layer(module: str) -> int:
    if module.startswith("main_"):
        return LAYERS["main"]
    prefixes = [p for p in LAYERS if module == p or module.startswith(p + ".")]
    assert prefixes, f"{module} is in no layer of LAYERS (docs/architecture.md): add it"
    return LAYERS[max(prefixes, key=len)]


def imports_of(module: str, path: Path, modules: Set[str]) -> List[Import]:
    """Every import in ``path`` (the plugin's modules, the standard library, third parties),
    relative ones resolved; ``from P import name`` counts as an import of ``P.name`` where that is
    one of ``modules``, else of ``P``."""
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    found: List[Import] = []

    def targets(node: ast.stmt) -> List[str]:
        if isinstance(node, ast.Import):
            return [alias.name for alias in node.names]
        assert isinstance(node, ast.ImportFrom)
        if node.level:
            base = package[: len(package) - node.level + 1]
            source = ".".join(base + ([node.module] if node.module else []))
        else:
            source = node.module or ""
        named = [f"{source}.{alias.name}" for alias in node.names if f"{source}.{alias.name}" in modules]
        return named + ([source] if len(named) < len(node.names) else [])

    def visit(body: List[ast.stmt], local: bool) -> None:
        group_start: Optional[int] = None
        for node in body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                group_start = node.lineno if group_start is None else group_start
                end = node.end_lineno or node.lineno
                found.extend(Import(module, n, node.lineno, end, local, group_start) for n in targets(node))
                continue
            group_start = None
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                visit(node.body, True)
            elif isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                continue  # never runs
            else:  # class bodies, if / try / with / for blocks: the scope they are in
                for field in ("body", "orelse", "finalbody"):
                    visit(getattr(node, field, None) or [], local)
                for block in getattr(node, "handlers", None) or getattr(node, "cases", None) or []:
                    visit(block.body, local)

    visit(ast.parse(path.read_text(), str(path)).body, False)
    return found


@functools.lru_cache(maxsize=1)
def all_imports() -> Tuple[Import, ...]:
    """Every import of the package's modules, the entry points' and the bridge's."""
    files = module_files()
    found: List[Import] = []
    for module, path in files.items():
        found += imports_of(module, path, set(files))
    return tuple(found)


def own_imports(imports: Sequence[Import]) -> List[Import]:
    """The imports of the plugin's own modules: what the layers and the cycle check are about."""
    return [imp for imp in imports if is_own(imp.imported)]


def packages_run_by(importer: str, imported: str) -> List[str]:
    """The packages whose ``__init__`` importing ``imported`` runs first (those above it that the
    importer is not itself inside: those are already being imported)."""
    parts = imported.split(".")
    parents = [".".join(parts[:i]) for i in range(1, len(parts))]
    return [p for p in parents if not (importer == p or importer.startswith(p + "."))]


def find_cycle(edges: Dict[str, Set[str]]) -> Optional[List[str]]:
    state: Dict[str, int] = {}  # 1: on the current path, 2: done
    path: List[str] = []

    def dfs(node: str) -> Optional[List[str]]:
        state[node] = 1
        path.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state:
                cycle = dfs(nxt)
                if cycle:
                    return cycle
        state[node] = 2
        path.pop()
        return None

    for start in sorted(edges):
        if start not in state:
            cycle = dfs(start)
            if cycle:
                return cycle
    return None


def module_level_edges(imports: Sequence[Import]) -> Dict[str, Set[str]]:
    edges: Dict[str, Set[str]] = {}
    for imp in own_imports(imports):
        if not imp.local and imp.imported != imp.importer:
            targets = edges.setdefault(imp.importer, set())
            targets.add(imp.imported)
            targets.update(packages_run_by(imp.importer, imp.imported))
    return edges


def upward(imports: Sequence[Import]) -> List[str]:
    return sorted(
        f"{imp.importer} (layer {layer(imp.importer)}) -> {imp.imported} (layer {layer(imp.imported)}), "
        f"line {imp.line}{' (function-local)' if imp.local else ''}"
        for imp in own_imports(imports)
        if layer(imp.imported) > layer(imp.importer) and (imp.importer, imp.imported) not in ALLOWED_UP
    )


def unexplained_local(imports: Sequence[Import], files: Optional[Dict[str, Path]] = None) -> List[str]:
    files = files or module_files()
    comments: Dict[str, Set[int]] = {}
    missing = []
    for imp in imports:
        if not imp.local:
            continue
        if imp.importer not in comments:
            tokens = tokenize.generate_tokens(io.StringIO(files[imp.importer].read_text()).readline)
            comments[imp.importer] = {
                t.start[0] for t in tokens if t.type == tokenize.COMMENT and LOCAL_REASON.match(t.string)
            }
        lines = set(range(imp.group_start - 2, imp.end_line + 1))
        if not lines & comments[imp.importer]:
            where = files[imp.importer]
            where = where.relative_to(REPO) if REPO in where.parents else where
            missing.append(f"{where}:{imp.line} imports {imp.imported}")
    return sorted(missing)


def test_the_module_level_imports_have_no_cycle():
    cycle = find_cycle(module_level_edges(all_imports()))
    assert cycle is None, "import cycle at module level: " + " -> ".join(cycle or [])


def test_no_import_points_up_a_layer():
    found = upward(all_imports())
    assert not found, "imports reaching up a layer (docs/architecture.md), outside ALLOWED_UP:\n" + "\n".join(found)


def test_the_allowed_upward_imports_still_exist():
    present = {(imp.importer, imp.imported) for imp in own_imports(all_imports())}
    assert set(ALLOWED_UP) <= present, f"ALLOWED_UP entries no longer needed: {sorted(set(ALLOWED_UP) - present)}"


def test_every_function_local_import_says_why():
    missing = unexplained_local(all_imports())
    assert not missing, (
        "function-local imports without a '# local: <why>' comment on their line or within the 2 lines "
        "above (move them to the top unless they save start-up time, break a cycle or reach an optional "
        "package such as DALI):\n" + "\n".join(missing)
    )


def test_the_checks_catch_what_they_are_for(tmp_path):
    """A made-up module: relative, module-level and function-local imports are found, and a
    cycle, an upward import and an unexplained local import (the plugin's own, the standard
    library's or a third party's) each fail their check; an explained one passes."""
    source = tmp_path / "probe.py"
    source.write_text(
        "from . import errors\n"
        "from ..config import views\n"
        "import os\n"
        "def f():\n"
        "    from mvssl_plugin.cli import exits\n"
        "    # local: saves a second at start-up\n"
        "    from mvssl_plugin.train import pretrain\n"
        "def g():\n"
        "    import json\n"
        "def h():\n"
        "    import torch.nn as nn\n"
        "def i():\n"
        "    # local: torch takes seconds to load and only i needs it\n"
        "    import torch\n"
        "    import json\n"
        "def j():\n"
        "    import json  # local: made up, an explanation on the import's own line\n"
    )
    modules = {"mvssl_plugin.data.errors", "mvssl_plugin.config.views", "mvssl_plugin.cli.exits"}
    found = imports_of("mvssl_plugin.data.probe", source, modules)
    assert [(i.imported, i.local) for i in found] == [
        ("mvssl_plugin.data.errors", False),
        ("mvssl_plugin.config.views", False),
        ("os", False),
        ("mvssl_plugin.cli.exits", True),
        ("mvssl_plugin.train", True),  # pretrain is not in ``modules``: the package
        ("json", True),
        ("torch.nn", True),
        ("torch", True),
        ("json", True),
        ("json", True),
    ]
    assert [i.imported for i in own_imports(found)] == [
        "mvssl_plugin.data.errors",
        "mvssl_plugin.config.views",
        "mvssl_plugin.cli.exits",
        "mvssl_plugin.train",
    ]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": {"c"}}) is None
    edges = module_level_edges(
        [
            Import("mvssl_plugin.data.inmemory.cache", "mvssl_plugin.config.views", 1, 1, False, 1),
            Import("mvssl_plugin.data.inmemory.cache", "torch", 2, 2, False, 1),
        ]
    )
    assert edges == {"mvssl_plugin.data.inmemory.cache": {"mvssl_plugin.config.views", "mvssl_plugin.config"}}
    assert upward(found) == [
        "mvssl_plugin.data.probe (layer 3) -> mvssl_plugin.cli.exits (layer 9), line 5 (function-local)",
        "mvssl_plugin.data.probe (layer 3) -> mvssl_plugin.train (layer 8), line 7 (function-local)",
    ]
    assert unexplained_local(found, {"mvssl_plugin.data.probe": source}) == sorted(
        [
            f"{source}:5 imports mvssl_plugin.cli.exits",  # its group's comment comes after it
            f"{source}:9 imports json",  # the standard library's
            f"{source}:11 imports torch.nn",  # a third party's
        ]
    )
    assert LOCAL_REASON.match("# local: saves a second") and not LOCAL_REASON.match("# noqa: E402")
