"""No dead code: every module-level function and class of the package and the benchmarks is
used by code outside the tests (read off the source with ``ast``; nothing is imported). A name
used only by the tests is dead to a user; the package's public API and the names that tools
reach by string are listed in :data:`REACHED_OTHERWISE`, each with how it is reached."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Dict, List, Set, Tuple

REPO = Path(__file__).resolve().parents[1]

#: (module path, name): reached without an identifier in the code, and how
REACHED_OTHERWISE: Dict[Tuple[str, str], str] = {
    ("mvssl_plugin/encoder/model.py", "load_encoder"): "the public API: mvssl_plugin.load_encoder (__all__)",
    ("mvssl_plugin/registry.py", "register"): "the public API: mvssl_plugin.register (__all__)",
    ("mvssl_plugin/beta_rule.py", "geometric_mean_c"): "the beta rule's derivation of its constants from a "
    "{d: beta} sweep, for users fitting their own (docs/methods.md)",
    ("mvssl_plugin/beta_rule.py", "released_vicreg_betas"): "the release's VICReg betas per (d, m), the table "
    "docs/methods.md quotes",
    ("mvssl_plugin/beta_rule.py", "solo_vicreg_weights"): "the release's VICReg weights as solo-learn's, for a "
    "solo-learn vicreg recipe (docs/methods.md)",
}


def source_files() -> List[Path]:
    """What a user runs: the package, the benchmarks, the entry points, the bridge, setup.py."""
    files = sorted((REPO / "mvssl_plugin").rglob("*.py")) + sorted((REPO / "benchmarks").rglob("*.py"))
    return files + sorted(REPO.glob("main_*.py")) + [REPO / "mvssl_plugin_autoregister.py", REPO / "setup.py"]


def definitions(path: Path) -> List[Tuple[str, int]]:
    tree = ast.parse(path.read_text(), str(path))
    return [
        (node.name, node.lineno)
        for node in tree.body
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and not node.name.startswith("__")
    ]


def uses(path: Path) -> Dict[str, int]:
    """Identifiers read in ``path`` (names, attributes, imported names), with counts; a
    definition's own name is not a use."""
    counts: Dict[str, int] = {}
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        name = None
        if isinstance(node, ast.Name):
            name = node.id
        elif isinstance(node, ast.Attribute):
            name = node.attr
        elif isinstance(node, ast.alias):
            name = node.name.rsplit(".", 1)[-1]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.isidentifier():
            name = node.value  # getattr(module, "name"), __all__ entries
        if name:
            counts[name] = counts.get(name, 0) + 1
    return counts


def all_uses(files: List[Path]) -> Dict[str, Set[str]]:
    """identifier -> the files that use it."""
    where: Dict[str, Set[str]] = {}
    for path in files:
        for name in uses(path):
            where.setdefault(name, set()).add(path.name)
    for path in files:  # a function named as "mvssl_plugin.module:function" (data/formats.py's rows)
        for name in re.findall(r'"mvssl_plugin[\w.]*:(\w+)"', path.read_text()):
            where.setdefault(name, set()).add(path.name)
    text = (REPO / "pyproject.toml").read_text()  # console scripts: "module:function"
    for line in text.splitlines():
        if ":" in line and "=" in line and '"mvssl_plugin' in line:
            where.setdefault(line.rsplit(":", 1)[1].strip('"'), set()).add("pyproject.toml")
    return where


def unused(files: List[Path]) -> List[str]:
    """``path:line name`` of each module-level function or class of ``files`` that none of them uses."""
    found = []
    where = all_uses(files)
    for path in files:
        rel = str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)
        for name, line in definitions(path):
            if (rel, name) in REACHED_OTHERWISE or where.get(name):
                continue
            found.append(f"{rel}:{line} {name}")
    return found


def test_every_module_level_function_and_class_is_used_outside_the_tests():
    assert unused(source_files()) == [], "used by tests alone or nowhere: remove it, or list it in REACHED_OTHERWISE"


def test_the_check_finds_a_name_used_nowhere_and_not_one_used_elsewhere(tmp_path):
    (tmp_path / "a.py").write_text("def nobody_calls_me():\n    return 1\n\n\nclass Used:\n    pass\n")
    (tmp_path / "b.py").write_text("from a import Used\n\nprint(Used())\n")
    assert unused([tmp_path / "a.py", tmp_path / "b.py"]) == [f"{tmp_path / 'a.py'}:1 nobody_calls_me"]
