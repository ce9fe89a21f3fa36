"""Where ``--config-name`` finds a recipe: scripts/<kind>/<dataset>/ of the working
directory, else the plugin's own (scripts/<kind>/<dataset>/ of its checkout, or the wheel's
mvssl_plugin/recipes/<kind>/<dataset>/), with no ``--config-path`` needed."""

from __future__ import annotations

import os
from pathlib import Path
from typing import List, Optional

from omegaconf import DictConfig

from mvssl_plugin.config import open_cfg
from mvssl_plugin.config.recipe_files import GROUP_DIRS, PACKAGE_RECIPES, recipe_roots
from mvssl_plugin.config.recipe_files import recipe_files as _recipe_files
from mvssl_plugin.errors import ConfigError

__all__ = ["GROUP_DIRS", "PACKAGE_RECIPES", "compose_recipe", "find_recipe_dir", "list_recipes", "recipe_roots"]


def list_recipes(kind: str) -> List[str]:
    """Names of the recipes under each root's <dataset>/ folders (and folders below, e.g. paper/)."""
    return sorted({p.name for root in recipe_roots(kind) for p in _recipe_files(root)})


def groups_dir(recipe_dir: Path) -> Path:
    """The folder holding the shared config groups (``base/`` ...) for a recipe folder:
    the nearest one up the tree, else the recipe folder's parent."""
    for folder in [recipe_dir, *recipe_dir.parents]:
        if (folder / "base").is_dir():
            return folder
    return recipe_dir.parent


def find_recipe_dir(config_name: str, kind: str) -> Path:
    """The folder under a recipe root (:func:`recipe_roots`) holding ``config_name`` (``.yaml`` optional)."""
    name = config_name if config_name.endswith((".yaml", ".yml")) else f"{config_name}.yaml"
    for root in recipe_roots(kind):
        hits = sorted(p for p in _recipe_files(root) if p.name == name)
        if len(hits) > 1:
            raise ConfigError(f"--config-name {config_name} is ambiguous: {[str(h) for h in hits]}; pass --config-path")
        if hits:
            return hits[0].parent
    available = sorted(list_recipes(kind))
    where = " or ".join(str(root) for root in recipe_roots(kind)) or f"scripts/{kind}/"
    raise ConfigError(f"no recipe named {config_name!r} under {where}; available: {available}")


def _argv_value(argv: List[str], *flags: str) -> Optional[str]:
    for i, arg in enumerate(argv):
        for flag in flags:
            if arg == flag and i + 1 < len(argv):
                return argv[i + 1]
            if arg.startswith(flag + "="):
                return arg.split("=", 1)[1]
    return None


def with_recipe_path(argv: List[str], kind: str) -> List[str]:
    """Completes the command line for Hydra: ``--config-path`` for a bare ``--config-name``
    found under a recipe root (a relative one is made absolute: Hydra would read it
    relative to this module), and ``--config-dir`` for the shared groups (:func:`groups_dir`)."""
    name = _argv_value(argv, "--config-name", "-cn")
    if name is None:
        return argv
    config_path = _argv_value(argv, "--config-path", "-cp")
    if config_path is None:
        config_path = str(find_recipe_dir(name, kind))
    else:
        argv = _without_option(argv, "--config-path", "-cp")
        config_path = os.path.abspath(config_path)
    options = ["--config-path", config_path]
    if _argv_value(argv, "--config-dir", "-cd") is None:
        options += ["--config-dir", str(groups_dir(Path(config_path)))]
    # options first: Lightning's DDP launcher re-runs argv with overrides appended, and
    # Hydra's parser wants all overrides in one run at the end
    return options + argv


def _without_option(argv: List[str], *flags: str) -> List[str]:
    out, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg in flags:
            skip = True
        elif not arg.startswith(tuple(f + "=" for f in flags)):
            out.append(arg)
    return out


def compose_recipe(config_name: str, kind: str, overrides: Optional[List[str]] = None) -> DictConfig:
    """The config ``--config-name config_name`` would give (opened and resolved as the
    entry points do), for notebooks and tests."""
    # local: Hydra loads for a compose here only; mvssl-recipes imports this module for its recipe lookup
    from hydra import compose, initialize_config_dir

    recipe_dir = find_recipe_dir(config_name, kind)
    search = f"hydra.searchpath=[file://{groups_dir(recipe_dir)}]"
    with initialize_config_dir(config_dir=str(recipe_dir), version_base="1.2"):
        return open_cfg(compose(config_name=config_name, overrides=[search, *(overrides or [])]))
