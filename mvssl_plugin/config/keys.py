"""Keys nobody reads: a warning naming the nearest known key, or with ``strict_keys: true`` an error.

Why: Hydra adds any ``+key=`` / ``++key=`` and any key of a user's own recipe without a
word, and solo-learn reads only the keys it knows, so ``++method_kwargs.lamda=0.1`` trains
with the default ``lamb`` as if the typo had worked.

A key is known when something reads it or a shipped recipe sets it:

* every key of every recipe and config group under the recipe roots (read at each check,
  with Hydra's package rules, so a key added to a recipe is known at once);
* the keys solo-learn's code reads, found in its source (its ``parse_cfg``, ``BaseMethod``,
  the Checkpointer and AutoResumer, the method's own class): attribute reads of ``cfg``
  and the keys handed to ``omegaconf_select`` / ``select`` as string literals;
* the method's defaults and rules (``DEFAULTS`` / ``SHARED_DEFAULTS`` / ``RULES``);
* Lightning ``Trainer`` arguments (the entry points hand every matching top-level key to it);
* :data:`PLUGIN_KEYS`, the plugin's optional keys that no recipe needs to set.

Subtrees handed on unread (``backbone.kwargs``, ``optimizer.kwargs``...) are not checked.
"""

from __future__ import annotations

import difflib
import importlib.util
import inspect
import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Any, FrozenSet, Iterable, List, Optional, Set, Tuple

from omegaconf import DictConfig, ListConfig, OmegaConf

from mvssl_plugin.config.recipe_files import GROUP_DIRS, recipe_roots
from mvssl_plugin.config.values import select
from mvssl_plugin.errors import ConfigError

#: optional keys the plugin reads that no recipe has to set
PLUGIN_KEYS = (
    "strict_keys",
    "run_summary",
    "study",
    "data.val_fraction",
    "data.holdout",
    "data.skip_bad_files",
    "data.download",
    "data.no_labels",
    "data.num_views",
    "data.num_small_views",
    "dali.device",
    "dali.num_threads",
    "memory.size",
    "memory.cache_dir",
    "memory.prefetch",
    "memory.resolution.start",
    "memory.resolution.ramp_start",
    "memory.resolution.ramp_end",
    "memory.resolution.multiple",
    "memory.resolution.strength_start",
    "performance.compile",
    "performance.disable_channel_last",
    "performance.loss_fp32",
    "performance.finite_check_every",
    "performance.cpu_threads",
    "performance.precision_reason",
    "performance.optimizer_path",
    "wandb.tags",
    "auto_resume.accept_changes",
    "scheduler.tail_epochs",
    "scheduler.warmup_minutes",
    "scheduler.tail_minutes",
    "scheduler.cycle_minutes",
    "method_kwargs.beta_c",
    "method_kwargs.beta_multiview_factor",
    "method_kwargs.beta_rule",
    "probe.device",
    "probe.label_smoothing",
    "pretrained_feature_extractor",
)
#: subtrees whose keys are handed on to code that takes any keyword (not checked)
FREE_FORM = ("backbone.kwargs", "optimizer.kwargs", "run_summary", "hydra")
#: solo-learn files whose ``cfg`` reads count, per entry point kind
SOLO_FILES = {
    "pretrain": (
        "args/pretrain.py",
        "args/dataset.py",
        "methods/base.py",
        "utils/checkpointer.py",
        "utils/auto_resumer.py",
    ),
    "linear": (
        "args/linear.py",
        "args/dataset.py",
        "methods/linear.py",
        "utils/checkpointer.py",
        "utils/auto_resumer.py",
    ),
}
_ATTRIBUTE_READ = re.compile(r"\bcfg\.((?:[a-z_][a-z0-9_]*\.)*[a-z_][a-z0-9_]*)")
_SELECT_READ = re.compile(r"(?:omegaconf_select|select)\(\s*cfg,\s*\"([\w.]+)\"")
_GET_READ = re.compile(r"\bcfg\.((?:[a-z_][a-z0-9_]*\.)*)get\(\s*\"(\w+)\"")
#: methods of config values and nodes: calling ``get`` on the node ``data`` reads ``data``, not a key ``data.get``
_VALUE_METHODS = frozenset(name for kind in (str, dict, list) for name in dir(kind) if not name.startswith("_"))
_PACKAGE = re.compile(r"^#\s*@package\s+(\S+)", re.MULTILINE)
LIST_ITEM = "[]"


def flat_keys(node: Any, prefix: str = "") -> Set[str]:
    """Every key path of a config, ``a.b.c``; list items as ``a[].b`` (any index)."""
    keys: Set[str] = set()
    if isinstance(node, (DictConfig, dict)):
        items = node.items_ex(resolve=False) if isinstance(node, DictConfig) else node.items()
        for name, value in items:
            path = f"{prefix}.{name}" if prefix else str(name)
            keys.add(path)
            keys |= flat_keys(value, path)
    elif isinstance(node, (ListConfig, list)):
        for item in node:
            keys |= flat_keys(item, f"{prefix}{LIST_ITEM}")
    return keys


def keys_in_source(text: str) -> Set[str]:
    """Config keys a piece of Python source reads from a variable named ``cfg`` (a method
    called on a value, e.g. ``startswith`` on ``backbone.name``, counts as a read of the value)."""
    keys = set(_ATTRIBUTE_READ.findall(text)) | set(_SELECT_READ.findall(text))
    keys |= {f"{chain}{name}" for chain, name in _GET_READ.findall(text)}
    found = set()
    for key in keys:
        parent, _, last = key.rpartition(".")
        found.add(parent if last in _VALUE_METHODS else key)
    return {key for key in found if key}


def is_known(key: str, known: Set[str]) -> bool:
    """``key`` is read by someone, or lies in a subtree handed on unread (:data:`FREE_FORM`)."""
    return key in known or any(key == tree or key.startswith(f"{tree}.") for tree in FREE_FORM)


def _package(path: Path, root: Path, text: str) -> str:
    """Where Hydra puts a yaml file's keys: its ``@package`` header, else the group folder
    it sits in (``augmentations/cifar.yaml`` -> ``augmentations``), else the root (recipes)."""
    header = _PACKAGE.search(text)
    if header:
        package = header.group(1)
        return "" if package == "_global_" else package
    parts = path.relative_to(root).parts
    return parts[0] if len(parts) > 1 and parts[0] in GROUP_DIRS else ""


@lru_cache(maxsize=8)
def _recipe_keys(roots: Tuple[Path, ...]) -> FrozenSet[str]:
    keys: Set[str] = set()
    for root in roots:
        for path in root.rglob("*.yaml"):
            text = path.read_text()
            content = OmegaConf.create(text) if text.strip() else OmegaConf.create({})
            if isinstance(content, DictConfig):
                content = OmegaConf.masked_copy(content, [k for k in content if k not in ("defaults", "hydra")])
            package = _package(path, root, text)
            keys |= flat_keys(content, package)
            if package:
                keys |= set(_prefixes(package))
    return frozenset(keys)


def recipe_keys(kind: str) -> FrozenSet[str]:
    """Every key the recipes and groups of the recipe roots set (./scripts/<kind>, the package's)."""
    return _recipe_keys(tuple(recipe_roots(kind)))


def _prefixes(key: str) -> Iterable[str]:
    parts = key.split(".")
    return (".".join(parts[:i]) for i in range(1, len(parts) + 1))


#: what the scan below finds at the solo-learn commit the plugin pins (``commit``), per kind: the
#: answer where solo-learn's source cannot be read, and the reference that names a key a later
#: release no longer reads (tests/config/test_keys.py holds it equal to the scan at the pin)
PINNED_SOLO_KEYS = Path(__file__).with_name("solo_keys.json")


def scan_solo_keys(kind: str, base: Optional[Path] = None) -> FrozenSet[str]:
    """Keys solo-learn's parser, BaseMethod / LinearModel, Checkpointer and AutoResumer read, from
    the source of the installed solo-learn (or the package folder ``base``); empty without it."""
    if base is None:
        spec = importlib.util.find_spec("solo")
        if spec is None or spec.origin is None:
            return frozenset()
        base = Path(spec.origin).parent
    keys: Set[str] = set()
    for name in SOLO_FILES[kind]:
        path = base / name
        if path.is_file():
            keys |= keys_in_source(path.read_text())
    return frozenset(keys)


@lru_cache(maxsize=1)
def pinned_solo_keys() -> dict:
    return json.loads(PINNED_SOLO_KEYS.read_text())


@lru_cache(maxsize=4)
def solo_keys(kind: str) -> FrozenSet[str]:
    """The keys solo-learn reads: the installed source's, else the pinned commit's."""
    return scan_solo_keys(kind) or frozenset(pinned_solo_keys()[kind])


def dropped_by_solo(kind: str) -> FrozenSet[str]:
    """Keys solo-learn read at the pinned commit that the installed one no longer reads: a key a
    release moved or removed, which a recipe written for the pin may still set."""
    return frozenset(pinned_solo_keys()[kind]) - solo_keys(kind)


def method_keys(method_class: Optional[type]) -> Set[str]:
    """Keys the method's classes read (their source) and its kwarg defaults and rules."""
    keys: Set[str] = set()
    if method_class is None:
        return keys
    for cls in method_class.__mro__:
        module = getattr(cls, "__module__", "")
        if module.startswith(("solo.", "mvssl_plugin.")):
            try:
                keys |= keys_in_source(inspect.getsource(cls))
            except (OSError, TypeError):
                pass
    for attribute in ("SHARED_DEFAULTS", "DEFAULTS"):
        keys |= {f"method_kwargs.{name}" for name in getattr(method_class, attribute, {}) or {}}
    keys |= {
        rule[0] if rule[0].startswith("method_kwargs.") else f"method_kwargs.{rule[0]}"
        for rule in getattr(method_class, "RULES", ())
    }
    return keys


@lru_cache(maxsize=1)
def trainer_keys() -> FrozenSet[str]:
    """Lightning Trainer's arguments: the entry points pass any top-level key of that name."""
    try:
        # local: Lightning (torch with it, seconds) loads for the key check only; none installed: no keys
        from lightning.pytorch import Trainer
    except ImportError:
        return frozenset()
    return frozenset(name for name in inspect.signature(Trainer.__init__).parameters if name != "self")


def known_keys(kind: str, method_class: Optional[type] = None) -> Set[str]:
    """Every key a ``kind`` (pretrain / linear) run may set without a warning."""
    known = set(recipe_keys(kind)) | set(solo_keys(kind)) | method_keys(method_class) | set(trainer_keys())
    for key in PLUGIN_KEYS:
        known |= set(_prefixes(key))
    for key in list(known):
        known |= set(_prefixes(key))
    return known


def unknown_keys(cfg: DictConfig, known: Set[str]) -> List[Tuple[str, Optional[str]]]:
    """(key, nearest known key or None) for each key of ``cfg`` that is not known."""
    found = []
    for key in sorted(flat_keys(cfg)):
        if is_known(key, known):
            continue
        parent = key.rsplit(".", 1)[0] if "." in key else None
        if parent is not None and parent not in known and not parent.endswith(LIST_ITEM):
            continue  # named once, at the top of an unknown subtree
        close = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.6)
        found.append((key, close[0] if close else None))
    return found


def check_keys(
    cfg: DictConfig, kind: str, method_class: Optional[type] = None, plugin_method: bool = True
) -> List[str]:
    """Warnings (returned as notices) for keys nobody reads; with ``strict_keys: true``
    a ConfigError instead. ``method_kwargs`` of solo-learn's own methods are not checked
    (``plugin_method=False``): each reads them its own way."""
    known = known_keys(kind, method_class)
    if not plugin_method:
        known |= {key for key in flat_keys(cfg) if key.startswith("method_kwargs.")}
    found = unknown_keys(cfg, known)
    if not found:
        return []
    dropped = dropped_by_solo(kind)
    commit = pinned_solo_keys()["commit"][:7]
    lines = [
        f"{key}"
        + (f" (did you mean {close}?)" if close else "")
        + (
            f" (solo-learn read it at {commit}, the commit the plugin pins; the installed one does not)"
            if key in dropped
            else ""
        )
        for key, close in found
    ]
    if bool(select(cfg, "strict_keys", False)):
        raise ConfigError(
            f"{', '.join(lines)}: no key of that name is read by solo-learn or the plugin: correct or remove "
            f"{'it' if len(lines) == 1 else 'them'} (strict_keys=true)"
        )
    return [
        f"warning: {line} is read by neither solo-learn nor the plugin: it has no effect "
        "(strict_keys=true makes this an error)"
        for line in lines
    ]
