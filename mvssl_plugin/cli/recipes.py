"""``mvssl-recipes``: the recipes the package ships, and copying its solo-learn-layout recipes
into a solo-learn checkout.

    mvssl-recipes [list]                  recipes of mvssl-pretrain / mvssl-linear, with their folders
    mvssl-recipes show NAME               the file of a recipe (as --config-name finds it)
    mvssl-recipes install-solo SOLO_DIR   copies the recipes in solo-learn's layout into
                                          SOLO_DIR/scripts/pretrain/<dataset>/ (for its main_pretrain.py)
"""

from __future__ import annotations

import argparse
import filecmp
import shutil
import sys
from pathlib import Path
from typing import List, Optional

from mvssl_plugin.cli.config_name import find_recipe_dir
from mvssl_plugin.config.recipe_files import SOLO_RECIPES, recipe_files, recipe_roots
from mvssl_plugin.errors import ConfigError

KINDS = ("pretrain", "linear")


def recipe_listing() -> str:
    """Every recipe ``--config-name`` finds, per kind and root (the first root wins a name)."""
    lines = []
    for kind in KINDS:
        for root in recipe_roots(kind):
            names = sorted(p.relative_to(root).as_posix() for p in recipe_files(root))
            lines.append(f"{kind} recipes in {root}:")
            lines += [f"  {name}" for name in names]
    return "\n".join(lines)


def solo_recipes() -> List[Path]:
    """The recipes in solo-learn's layout, relative to ``SOLO_RECIPES``."""
    return sorted(p.relative_to(SOLO_RECIPES) for p in SOLO_RECIPES.rglob("*.yaml"))


def is_solo_checkout(path: Path) -> bool:
    return all((path / part).exists() for part in ("main_pretrain.py", "solo/methods/__init__.py", "scripts/pretrain"))


def brings_own_folder(rel: Path) -> bool:
    """A dataset folder solo-learn has none of (STL-10) ships whole, with its own augmentations/
    and wandb/; the others go next to solo-learn's files and use its groups."""
    return (SOLO_RECIPES / rel.parts[0] / rel.parts[1] / "augmentations").is_dir()


def install_solo(target: Path, force: bool = False) -> List[str]:
    """Copies the solo-layout recipes into ``target``; returns what was done, one line per file.

    Raises:
        SystemExit: ``target`` is not a solo-learn checkout, or a different file is in the way.
    """
    if not is_solo_checkout(target):
        raise SystemExit(
            f"mvssl-recipes: {target} is not a solo-learn checkout (needs main_pretrain.py, solo/methods/, "
            "scripts/pretrain/)"
        )
    done, clashes, missing = [], [], []
    for rel in solo_recipes():
        source, dest = SOLO_RECIPES / rel, target / "scripts" / rel
        if dest.exists() and not filecmp.cmp(source, dest, shallow=False) and not force:
            clashes.append(str(dest))
        if not dest.parent.is_dir() and not brings_own_folder(rel):
            missing.append(str(dest.parent))
    if missing:
        raise SystemExit(
            f"mvssl-recipes: {', '.join(sorted(set(missing)))} missing: not the solo-learn layout this plugin knows"
        )
    if clashes:
        raise SystemExit(f"mvssl-recipes: would overwrite files that differ: {', '.join(clashes)} (--force to replace)")
    for rel in solo_recipes():
        source, dest = SOLO_RECIPES / rel, target / "scripts" / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, dest)
        done.append(f"{dest}")
    return done


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(prog="mvssl-recipes", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command")
    sub.add_parser("list", help="the recipes --config-name finds (default)")
    show = sub.add_parser("show", help="the file of a recipe")
    show.add_argument("name")
    show.add_argument("--kind", choices=KINDS, default=None)
    install = sub.add_parser("install-solo", help="copy the solo-learn-layout recipes into a solo-learn checkout")
    install.add_argument("solo_dir", type=Path)
    install.add_argument("--force", action="store_true", help="replace files of the same name that differ")
    args = parser.parse_args(argv)
    if args.command in (None, "list"):
        print(recipe_listing())
    elif args.command == "show":
        name = args.name if args.name.endswith((".yaml", ".yml")) else f"{args.name}.yaml"
        for kind in [args.kind] if args.kind else KINDS:
            try:
                print(find_recipe_dir(name, kind) / name)
                return
            except ConfigError as err:
                error = err
        raise SystemExit(f"mvssl-recipes: {error}")
    else:
        for line in install_solo(args.solo_dir.resolve(), args.force):
            print(f"copied {line}")
        folders = sorted({p.parts[1] for p in solo_recipes()})
        print(
            f"run from {args.solo_dir}: python3 main_pretrain.py --config-path scripts/pretrain/{folders[0]}/ "
            "--config-name mabt.yaml (mvssl-plugin registers its methods when solo-learn imports them)"
        )


if __name__ == "__main__":
    sys.exit(main())
