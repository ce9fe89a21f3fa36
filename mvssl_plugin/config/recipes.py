"""Where the recipes live (scripts/<kind>/ of the working directory and of the plugin's
checkout) and which files are recipes rather than shared groups: the command line looks
recipes up here, and the unknown-key check reads every key they hold."""

from __future__ import annotations

from pathlib import Path
from typing import List

REPO_ROOT = Path(__file__).resolve().parents[2]
#: Config groups shared by the recipes under scripts/<kind>/, not recipes themselves.
GROUP_DIRS = ("base", "augmentations", "wandb", "study_pair", "released")


def recipe_roots(kind: str) -> List[Path]:
    """Where ``--config-name`` is looked up: ./scripts/<kind>, then the plugin checkout's."""
    roots = [Path.cwd() / "scripts" / kind, REPO_ROOT / "scripts" / kind]
    return list(dict.fromkeys(root.resolve() for root in roots if root.is_dir()))


def recipe_files(root: Path) -> List[Path]:
    """Recipes under ``root``: yaml files one or more folders down, outside the group folders."""
    return [p for p in root.rglob("*.yaml") if len(p.relative_to(root).parts) > 1 and p.parent.name not in GROUP_DIRS]
