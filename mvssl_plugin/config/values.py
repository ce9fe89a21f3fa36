"""Typed reads of a config and the predicates every check is built from."""

from __future__ import annotations

import numbers
from typing import Any, Callable

from omegaconf import DictConfig, OmegaConf

from mvssl_plugin.errors import ConfigError

AUTO = "auto"


def select(cfg: DictConfig, key: str, default: Any = None) -> Any:
    return OmegaConf.select(cfg, key, default=default)


def is_int(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def is_number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def positive(value: Any) -> bool:
    return is_number(value) and value > 0


def non_negative(value: Any) -> bool:
    return is_number(value) and value >= 0


def probability(value: Any) -> bool:
    return is_number(value) and 0 <= value <= 1


def count(value: Any) -> bool:
    return is_int(value) and value >= 1


def boolean(value: Any) -> bool:
    return isinstance(value, bool)


Rule = tuple[str, Callable[[Any], bool], str]


def require(cfg: DictConfig, key: str, ok: Callable[[Any], bool], what: str, prefix: str = "") -> None:
    """Raises ConfigError ``<prefix><key>=value: what`` unless the key is absent or ``ok(value)``."""
    value = select(cfg, key)
    if value is not None and not ok(value):
        raise ConfigError(f"{prefix}{key}={value!r}: {what}")


def apply_rules(cfg: DictConfig, rules: tuple[Rule, ...], prefix: str = "") -> None:
    for key, ok, what in rules:
        require(cfg, key, ok, what, prefix)


def open_cfg(cfg: DictConfig) -> DictConfig:
    """Opens a composed config for solo-learn's defaults and resolves interpolations, so
    that args.json holds numbers, not ``${...}`` strings."""
    OmegaConf.set_struct(cfg, False)
    OmegaConf.resolve(cfg)
    return cfg
