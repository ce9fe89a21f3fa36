"""What the pretraining and linear entry points share: recipe lookup, error reporting,
resume, checkpointing, wandb and the Lightning Trainer, wired as solo-learn's scripts do."""

from __future__ import annotations

import inspect
import os
import sys
import warnings
from pathlib import Path
from typing import Callable, List, Optional, Tuple

from lightning.pytorch.callbacks import Callback
from omegaconf import DictConfig, OmegaConf

from mvssl_plugin.errors import ConfigError, DataError

REPO_ROOT = Path(__file__).resolve().parents[2]
#: Config groups shared by the recipes under scripts/<kind>/, not recipes themselves.
GROUP_DIRS = ("base", "augmentations", "wandb", "study_pair")


def recipe_roots(kind: str) -> List[Path]:
    """Where ``--config-name`` is looked up: ./scripts/<kind>, then the plugin checkout's."""
    roots = [Path.cwd() / "scripts" / kind, REPO_ROOT / "scripts" / kind]
    return list(dict.fromkeys(root.resolve() for root in roots if root.is_dir()))


def list_recipes(kind: str) -> List[str]:
    """Names of the recipes under scripts/<kind>/<dataset>/."""
    return sorted(
        {p.name for root in recipe_roots(kind) for p in root.glob("*/*.yaml") if p.parent.name not in GROUP_DIRS}
    )


def find_recipe_dir(config_name: str, kind: str) -> Path:
    """The folder under scripts/<kind>/ holding ``config_name`` (``.yaml`` optional)."""
    name = config_name if config_name.endswith((".yaml", ".yml")) else f"{config_name}.yaml"
    for root in recipe_roots(kind):
        hits = sorted(root.rglob(name))
        hits = [hit for hit in hits if hit.parent.name not in GROUP_DIRS]
        if len(hits) > 1:
            raise ConfigError(f"--config-name {config_name} is ambiguous: {[str(h) for h in hits]}; pass --config-path")
        if hits:
            return hits[0].parent
    available = sorted(list_recipes(kind))
    raise ConfigError(f"no recipe named {config_name!r} under scripts/{kind}/; available: {available}")


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
    found under scripts/<kind>/ (a relative one is made absolute: Hydra would read it
    relative to this module), and ``--config-dir`` for the shared groups one level up."""
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
        options += ["--config-dir", str(Path(config_path).parent)]
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


def report_config_errors(task: Callable[[DictConfig], object]) -> Callable[[DictConfig], object]:
    """Prints a :class:`ConfigError` (exit 2), a non-finite loss (exit 3) or a
    :class:`DataError` (exit 4) as one line, instead of Hydra's traceback. Checkpoints
    already written stay as they are."""

    def wrapped(cfg: DictConfig):
        try:
            return task(cfg)
        except ConfigError as err:
            print(f"mvssl config error: {err}", file=sys.stderr)
            sys.exit(2)
        except FloatingPointError as err:
            print(f"mvssl training stopped: {err}", file=sys.stderr)
            sys.exit(3)
        except DataError as err:
            print(f"mvssl data error: {err}", file=sys.stderr)
            sys.exit(4)

    return wrapped


def quiet_dependency_warnings() -> None:
    """Silences the deprecation and registry notices timm and solo-learn print on import,
    which bury the run's own output; warnings from elsewhere are untouched."""
    warnings.filterwarnings("ignore", category=FutureWarning, module=r"(timm|solo)(\.|$)")
    warnings.filterwarnings("ignore", message=r"Overwriting \w+ in registry", category=UserWarning)


def run_hydra(task: Callable[[DictConfig], object], kind: str) -> None:
    """Runs ``task`` as a Hydra app whose recipes live under scripts/<kind>/."""
    import hydra

    quiet_dependency_warnings()

    try:
        sys.argv = [sys.argv[0]] + with_recipe_path(sys.argv[1:], kind)
    except ConfigError as err:
        print(f"mvssl config error: {err}", file=sys.stderr)
        sys.exit(2)
    hydra.main(version_base="1.2", config_path=None)(report_config_errors(task))()


def prepare_cfg(cfg: DictConfig) -> DictConfig:
    """Opens the config for solo-learn's defaults and resolves interpolations, so that
    args.json holds numbers, not ``${...}`` strings."""
    OmegaConf.set_struct(cfg, False)
    OmegaConf.resolve(cfg)
    return cfg


def resume_checkpoint(cfg: DictConfig, run_kind: str) -> Tuple[Optional[str], Optional[str]]:
    """solo-learn's explicit or automatic resume: (checkpoint path, wandb run id).

    Automatic resume takes the newest complete checkpoint of a matching run (see
    :mod:`mvssl_plugin.cli.checkpoints`), not solo-learn's first-listed file."""
    from mvssl_plugin.cli.checkpoints import find_resumable

    if cfg.resume_from_checkpoint is not None:
        path = cfg.resume_from_checkpoint
        if not os.path.isfile(path):
            raise ConfigError(f"resume_from_checkpoint={path!r} is not a file")
        del cfg.resume_from_checkpoint
        return path, None
    if cfg.auto_resume.enabled:
        path, wandb_run_id = find_resumable(cfg, os.path.join(cfg.checkpoint.dir, run_kind))
        if path is not None:
            print(f"Resuming from previous checkpoint that matches specifications: '{path}'")
            return str(path), wandb_run_id
    return None, None


def compose_recipe(config_name: str, kind: str, overrides: Optional[List[str]] = None) -> DictConfig:
    """The config ``--config-name config_name`` would give (opened and resolved as the
    entry points do), for notebooks and tests."""
    from hydra import compose, initialize_config_dir

    recipe_dir = find_recipe_dir(config_name, kind)
    search = f"hydra.searchpath=[file://{recipe_dir.parent}]"
    with initialize_config_dir(config_dir=str(recipe_dir), version_base="1.2"):
        return prepare_cfg(compose(config_name=config_name, overrides=[search, *(overrides or [])]))


class EpochSummary(Callback):
    """Prints each epoch's metrics, which Lightning shows nowhere without a logger.

    Hooks are chosen to run after Lightning has reduced the epoch's values: validation
    at ``on_validation_end``, training at the next epoch's start and at the end of fit,
    and only for epochs this process trained (a resumed run has no values for the epoch
    it resumed after).
    """

    def __init__(self) -> None:
        self._trained_epoch: Optional[int] = None

    def on_validation_end(self, trainer, pl_module) -> None:
        if not trainer.sanity_checking:
            self._print(trainer, "val", trainer.current_epoch)

    def on_train_epoch_end(self, trainer, pl_module) -> None:
        self._trained_epoch = trainer.current_epoch

    def on_train_epoch_start(self, trainer, pl_module) -> None:
        if self._trained_epoch is not None and self._trained_epoch == trainer.current_epoch - 1:
            self._print(trainer, "train", self._trained_epoch)

    def on_train_end(self, trainer, pl_module) -> None:
        if self._trained_epoch is not None:
            self._print(trainer, "train", self._trained_epoch)

    def on_exception(self, trainer, pl_module, exception: BaseException) -> None:
        """Closes the progress bars now, so they are not redrawn at interpreter exit,
        after everything else the run printed."""
        bar = trainer.progress_bar_callback
        for name in ("_train_progress_bar", "_val_progress_bar", "_test_progress_bar", "_predict_progress_bar"):
            tqdm_bar = getattr(bar, name, None)
            if tqdm_bar is not None:
                tqdm_bar.close()

    @staticmethod
    def _print(trainer, prefix: str, epoch: int) -> None:
        metrics = {
            k.removesuffix("_epoch"): float(v)
            for k, v in trainer.callback_metrics.items()
            if k.startswith(prefix) and not k.endswith("_step") and v.numel() == 1
        }
        if metrics and trainer.is_global_zero:
            text = " ".join(f"{k}={v:.4g}" for k, v in sorted(metrics.items()))
            line = f"mvssl: epoch {epoch} {text}"
            bar = trainer.progress_bar_callback
            bar.print(line) if bar is not None else print(line, flush=True)  # keeps tqdm's bars intact


def run_tags(cfg: DictConfig) -> List[str]:
    """wandb tags that make runs of one project comparable: method, views, projector
    dimension, orthogonality weight (beta), data fraction."""
    from mvssl_plugin.config import beta_of, count_views

    method = cfg.method
    beta = beta_of(method, OmegaConf.select(cfg, "method_kwargs"))
    fraction = OmegaConf.select(cfg, "data.fraction", default=-1)
    tags = [
        f"method:{method}",
        f"views:{count_views(cfg)}",
        f"pdim:{OmegaConf.select(cfg, 'method_kwargs.proj_output_dim')}",
        f"fraction:{1.0 if fraction in (None, -1) else fraction:g}",
    ]
    if beta is not None:
        tags.append(f"beta:{beta:.4g}")
    return tags


def build_trainer(
    cfg: DictConfig, model, run_kind: str, wandb_run_id: Optional[str], resume_path: Optional[str] = None
):
    """Lightning Trainer with solo-learn's checkpoint layout (atomic writes, continuing in
    the resumed run's folder), wandb logger and learning-rate monitor, from the config's
    Trainer keys."""
    from lightning.pytorch import Trainer
    from lightning.pytorch.callbacks import LearningRateMonitor
    from lightning.pytorch.loggers.wandb import WandbLogger
    from lightning.pytorch.strategies.ddp import DDPStrategy

    from mvssl_plugin.cli.checkpoints import AtomicCheckpointer
    from mvssl_plugin.config import trainer_devices
    from mvssl_plugin.eval.callbacks import EffectiveRank, RunLog, TimeToAccuracy

    # the clocks come before the checkpointer, so each checkpoint holds its epoch's time
    run_log = RunLog()
    callbacks, logger = [EpochSummary(), run_log], None
    if OmegaConf.select(cfg, "time_to_accuracy.enabled", default=False):
        callbacks.append(TimeToAccuracy(cfg.time_to_accuracy.metrics, cfg.time_to_accuracy.targets, clock=run_log))
    if OmegaConf.select(cfg, "effective_rank.enabled", default=False):
        callbacks.append(EffectiveRank(cfg.effective_rank.num_samples))
    if cfg.checkpoint.enabled:
        callbacks.append(
            AtomicCheckpointer(
                cfg,
                logdir=os.path.join(cfg.checkpoint.dir, run_kind),
                frequency=cfg.checkpoint.frequency,
                keep_prev=cfg.checkpoint.keep_prev,
                resume_from=resume_path,
            )
        )
    if cfg.wandb.enabled:
        logger = WandbLogger(
            name=cfg.name,
            project=cfg.wandb.project,
            entity=cfg.wandb.entity,
            offline=cfg.wandb.offline,
            resume="allow" if wandb_run_id else None,
            id=wandb_run_id,
            tags=run_tags(cfg) if run_kind != "linear" else [run_kind],
        )
        logger.watch(model, log="gradients", log_freq=100)
        logger.log_hyperparams(OmegaConf.to_container(cfg))
        callbacks.append(LearningRateMonitor(logging_interval="step"))
    options = OmegaConf.to_container(cfg)
    valid = inspect.signature(Trainer.__init__).parameters
    kwargs = {name: options[name] for name in valid if name in options}
    kwargs.update(
        logger=logger if logger is not None else False,
        callbacks=callbacks,
        enable_checkpointing=False,
        devices=trainer_devices(cfg),
        # view-parallel runs give every process the same images and split the views instead
        use_distributed_sampler=not OmegaConf.select(cfg, "method_kwargs.view_parallel", default=False),
        strategy=DDPStrategy(find_unused_parameters=False) if cfg.strategy == "ddp" else cfg.strategy,
    )
    return Trainer(**kwargs)


def fit(cfg: DictConfig, model, train_loader, val_loader, run_kind: str):
    """What solo-learn's scripts end with: a contiguous (channels-last) model, resume,
    the Trainer, fit. ``run_kind`` names the folder under ``checkpoint.dir``."""
    import torch
    from solo.utils.misc import make_contiguous

    make_contiguous(model)
    if not cfg.performance.disable_channel_last:
        model = model.to(memory_format=torch.channels_last)
    ckpt_path, wandb_run_id = resume_checkpoint(cfg, run_kind)
    trainer = build_trainer(cfg, model, run_kind, wandb_run_id, resume_path=ckpt_path)
    trainer.fit(model, train_loader, val_loader, ckpt_path=ckpt_path)
    return trainer
