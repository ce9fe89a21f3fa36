"""The view count m, in one place: the one module that reads and writes solo-learn's crop keys.

The names, one each:
- ``data.num_views`` is m, the views per image, large and small: what the loss averages over,
  what the beta rule and the run's name count.
- ``method_kwargs.hard_views`` (k; unset or 0: all) is how many of the m each image trains on, its
  hardest (``methods/hard_views.py``): the loader cuts m, the loss and the beta rule count k.
- ``data.num_small_views`` is how many of the m are small (the pipelines whose crop_size is not
  the first pipeline's, solo-learn's rule); the other m - num_small_views are large. Unset: the
  small pipelines' own ``num_crops``.
- solo-learn's ``augmentations[i].num_crops`` and ``data.num_large_crops`` /
  ``num_small_crops`` are derived here: :func:`views_to_crops` spreads m over the pipelines,
  :func:`set_crop_counts` writes solo-learn's two counts, and :func:`views_of` reads them back
  as one :class:`ViewCount` (large, small, per crop size): the one form every reader takes.

Inside solo-learn's own ``main_pretrain.py``, which asserts 2 large crops for its methods,
:func:`hide_crop_counts` keeps the counts aside under :data:`HIDDEN_CROPS` and
:func:`restore_crop_counts` (the method's config check) puts them back; solo-learn's training
step reads them from the method object, which :func:`showing_crops` sets for one call (a fused
forward hands it one crop per resolution).
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Mapping, Sequence, Tuple

from omegaconf import DictConfig, OmegaConf

from mvssl_plugin.config.values import is_int, select
from mvssl_plugin.errors import ConfigError


@dataclass(frozen=True)
class ViewCount:
    """The views per image, the one form every reader takes: ``large`` views of the first
    pipeline's crop size, ``small`` ones of the others (solo-learn's rule), and the views per
    crop size in the pipelines' order (empty for an args.json read without its pipelines)."""

    large: int
    small: int
    per_resolution: Tuple[Tuple[int, int], ...] = ()
    hard: int = 0

    @property
    def m(self) -> int:
        """All views the loader cuts, large and small."""
        return self.large + self.small

    @property
    def trained(self) -> int:
        """The views per image the loss averages over and the beta rule counts: the ``hard``
        hardest of the m where ``method_kwargs.hard_views`` chooses, else all m."""
        return self.hard or self.m


def _from_pipelines(pipelines: Sequence[Any]) -> ViewCount:
    """The views the pipelines cut, by solo-learn's rule: crops of the first pipeline's size are large."""
    resolutions: Dict[int, int] = {}
    for pipeline in pipelines:
        if select(pipeline, "crop_size") is not None and select(pipeline, "num_crops") is not None:
            size = int(pipeline.crop_size)
            resolutions[size] = resolutions.get(size, 0) + int(pipeline.num_crops)
    first = int(pipelines[0].crop_size) if pipelines else None
    large = sum(n for size, n in resolutions.items() if size == first)
    small = sum(n for size, n in resolutions.items() if size != first)
    return ViewCount(large, small, tuple(resolutions.items()))


def views_of(cfg: DictConfig | Mapping[str, Any]) -> ViewCount:
    """The views of a config or a run's args.json (a plain dict; its ``method_kwargs`` too): solo-learn's
    ``data.num_large_crops`` / ``num_small_crops`` when set (every solo-learn method reads these,
    and a run's args.json holds them), else counted from the pipelines' ``num_crops``."""
    if not isinstance(cfg, DictConfig):
        cfg = OmegaConf.create(
            {
                "data": dict(cfg.get("data") or {}),
                "augmentations": cfg.get("augmentations") or [],
                "method_kwargs": dict(cfg.get("method_kwargs") or {}),
            }
        )
    counted = _from_pipelines(select(cfg, "augmentations", []) or [])
    hard = select(cfg, "method_kwargs.hard_views")
    hard = int(hard) if is_int(hard) else 0  # anything else the method's check names
    large, small = select(cfg, "data.num_large_crops"), select(cfg, "data.num_small_crops")
    if large is None:
        return ViewCount(counted.large, counted.small, counted.per_resolution, hard)
    return ViewCount(int(large), int(small or 0), counted.per_resolution, hard)


def set_crop_counts(cfg: DictConfig) -> None:
    """``data.num_large_crops`` / ``num_small_crops`` from the pipelines, by solo-learn's
    rule (crops of the first pipeline's size are large), so the method checks can run
    before solo-learn's parser does the same."""
    counted = _from_pipelines(cfg.augmentations)
    cfg.data.num_large_crops, cfg.data.num_small_crops = counted.large, counted.small


#: where :func:`hide_crop_counts` keeps the crop counts while solo-learn's script checks them
HIDDEN_CROPS = "mvssl_crop_counts"


def _spread(total: int, pipelines: list) -> None:
    """``total`` crops over ``pipelines`` evenly, the first ones one more when they do not divide it."""
    for i, pipeline in enumerate(pipelines):
        pipeline.num_crops = total // len(pipelines) + (1 if i < total % len(pipelines) else 0)


def views_to_crops(cfg: DictConfig) -> None:
    """Writes ``data.num_views`` (m, all views) and ``data.num_small_views`` into the
    pipelines' ``num_crops``: the small views over the small pipelines, the other m - small
    over the large ones (those of the first pipeline's crop size). No-op for what is unset.

    Raises:
        ConfigError: a count that is not an integer, or fewer views than pipelines to fill;
            m too small for the small views names the m that keeps them (m counts both kinds).
    """
    m, small = select(cfg, "data.num_views"), select(cfg, "data.num_small_views")
    pipelines = select(cfg, "augmentations")
    if not pipelines or (m is None and small is None):
        return
    large_pipes = [p for p in pipelines if p.crop_size == pipelines[0].crop_size]
    small_pipes = [p for p in pipelines if p.crop_size != pipelines[0].crop_size]
    if small is not None:
        if not is_int(small) or small < 0:
            raise ConfigError(f"data.num_small_views={small!r}: must be an integer >= 0")
        if small < len(small_pipes) or (small and not small_pipes):
            where = f"{len(small_pipes)} small augmentation pipeline(s)" if small_pipes else "no small pipeline"
            fix = "a recipe without small views" if small_pipes else "augmentations with a small pipeline"
            raise ConfigError(f"data.num_small_views={small}: the augmentations have {where}: use {fix}")
        _spread(small, small_pipes)
    else:
        small = sum(int(p.num_crops) for p in small_pipes)
    if m is None:
        return
    if not is_int(m) or m < 1:
        raise ConfigError(f"data.num_views={m!r}: must be an integer >= 1")
    if m - small < len(large_pipes):
        keep = f"; for {m} large and {small} small views set data.num_views={m + small}" if small else ""
        raise ConfigError(
            f"data.num_views={m} counts all views, large and small: with {small} small view(s) that leaves "
            f"{m - small} for {len(large_pipes)} large augmentation pipeline(s){keep}"
        )
    _spread(m - small, large_pipes)


#: a command-line override of a pipeline's crop count: ``augmentations.1.num_crops=4`` (``+``/``++`` too)
_CROPS_OVERRIDE = re.compile(r"^\+{0,2}augmentations\.(\d+)\.num_crops=(\S+)$")


def crops_on_command_line(overrides: Sequence[str]) -> Dict[int, str]:
    """``{pipeline index: value}`` of the crop counts a command line sets (Hydra overrides)."""
    found = {}
    for override in overrides:
        match = _CROPS_OVERRIDE.match(override.strip())
        if match:
            found[int(match.group(1))] = match.group(2)
    return found


def hydra_overrides() -> List[str]:
    """The running Hydra job's command-line overrides; none outside a Hydra job (a composed config)."""
    try:
        # local: Hydra is only there once a Hydra job runs; a composed config's checks need none of it
        from hydra.core.hydra_config import HydraConfig

        return list(HydraConfig.get().overrides.task)
    except (ImportError, ValueError):
        return []


def check_views_given_once(cfg: DictConfig, overrides: Sequence[str]) -> None:
    """Stops a launch whose command line sets a pipeline's ``num_crops`` to another count than
    ``data.num_views`` makes it: :func:`views_to_crops` would overwrite it without a word. The
    recipes give the count once, as ``data.num_views`` (solo-learn's augmentation files' own
    ``num_crops`` are spread over by design); a count given one way is taken as before.

    Raises:
        ConfigError: naming both keys and their values, and the fix.
    """
    given = crops_on_command_line(overrides)
    m, pipelines = select(cfg, "data.num_views"), select(cfg, "augmentations")
    if not given or m is None or not pipelines:
        return
    trial = OmegaConf.create(
        {
            "data": {"num_views": m, "num_small_views": select(cfg, "data.num_small_views")},
            "augmentations": [{"crop_size": p.crop_size, "num_crops": select(p, "num_crops")} for p in pipelines],
        }
    )
    try:
        views_to_crops(trial)
    except ConfigError:
        return  # views_to_crops says what is wrong with data.num_views itself, later
    for i, crops in sorted(given.items()):
        derived = trial.augmentations[i].num_crops if i < len(pipelines) else None
        if derived is not None and str(derived) != crops:
            fix = f"data.num_views={crops}" if len(pipelines) == 1 else "data.num_views (all the views)"
            raise ConfigError(
                f"data.num_views={m} and augmentations.{i}.num_crops={crops} give the view count two ways that "
                f"disagree (data.num_views={m} makes it {derived}): set the views once, with {fix}"
            )


def hide_crop_counts(cfg: DictConfig) -> None:
    """Keeps ``data.num_large_crops``/``num_small_crops`` aside and shows solo-learn's
    ``main_pretrain.py`` the 2 large crops it asserts for methods other than wmse/mae;
    :func:`restore_crop_counts` (the method's config check) puts them back."""
    large, small = int(cfg.data.num_large_crops), int(cfg.data.num_small_crops)
    if large != 2:
        cfg.data[HIDDEN_CROPS] = {"num_large_crops": large, "num_small_crops": small}
        cfg.data.num_large_crops = 2


def restore_crop_counts(cfg: DictConfig) -> None:
    """Undoes :func:`hide_crop_counts` (no-op when nothing is hidden)."""
    hidden = select(cfg, f"data.{HIDDEN_CROPS}")
    if hidden is not None:
        cfg.data.num_large_crops = int(hidden.num_large_crops)
        cfg.data.num_small_crops = int(hidden.num_small_crops)
        del cfg.data[HIDDEN_CROPS]


@contextlib.contextmanager
def showing_crops(method: Any, num_large: int, num_small: int) -> Iterator[None]:
    """Lets solo-learn's training step, which reads the crop counts from the method object,
    see ``num_large`` / ``num_small`` crops for one call; restores the method's own after."""
    saved = method.num_large_crops, method.num_small_crops, method.num_crops, method.multicrop
    method.num_large_crops, method.num_small_crops = num_large, num_small
    method.num_crops, method.multicrop = num_large + num_small, num_small > 0
    try:
        yield
    finally:
        method.num_large_crops, method.num_small_crops, method.num_crops, method.multicrop = saved
