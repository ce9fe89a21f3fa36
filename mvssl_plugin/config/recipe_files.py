"""Where the recipes live (scripts/<kind>/ of the working directory, then the plugin's own:
scripts/<kind>/ of its checkout, or mvssl_plugin/recipes/<kind>/ in the wheel) and which files
are recipes rather than shared groups: the command line looks recipes up here, and the
unknown-key check reads every key they hold."""

from __future__ import annotations

from pathlib import Path
from typing import List

_PACKAGE = Path(__file__).resolve().parents[1]
#: The plugin's recipes, one copy in the tree where solo-learn keeps its own: scripts/pretrain/<dataset>/,
#: scripts/linear/<dataset>/, and scripts/solo/ in solo-learn's layout. The wheel carries them as
#: package data (mvssl_plugin/recipes/, built by setup.py); a clone or an editable install reads scripts/.
PACKAGE_RECIPES = _PACKAGE / "recipes" if (_PACKAGE / "recipes" / "pretrain").is_dir() else _PACKAGE.parent / "scripts"
#: Recipes in solo-learn's own layout (scripts/pretrain/<dataset>/), copied into a solo-learn
#: checkout by ``mvssl-recipes install-solo``; not recipes of the plugin's entry points.
SOLO_RECIPES = PACKAGE_RECIPES / "solo"
#: Config groups shared by the recipes under <root>/<kind>/, not recipes themselves.
GROUP_DIRS = ("base", "augmentations", "wandb", "study_pair", "released")


def recipe_roots(kind: str) -> List[Path]:
    """Where ``--config-name`` is looked up: ./scripts/<kind> first (a user's own recipes, or
    solo-learn's in its tree), then the plugin's (:data:`PACKAGE_RECIPES`)."""
    roots = [Path.cwd() / "scripts" / kind, PACKAGE_RECIPES / kind]
    return list(dict.fromkeys(root.resolve() for root in roots if root.is_dir()))


def recipe_files(root: Path) -> List[Path]:
    """Recipes under ``root``: yaml files one or more folders down, outside the group folders."""
    return [p for p in root.rglob("*.yaml") if len(p.relative_to(root).parts) > 1 and p.parent.name not in GROUP_DIRS]
