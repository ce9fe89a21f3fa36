"""A pretraining run's backbone, taken out of its Lightning checkpoint into a folder that loads
anywhere (:mod:`mvssl_plugin.encoder.model`): ``model.safetensors``, ``config.json``, ``README.md``.

The architecture comes from the run's ``args.json`` (its backbone, width and stem), checked
against the checkpoint's tensors by rebuilding the network and loading them with
``strict=True``; the normalisation is the one the run's pipeline used. Every check runs before
anything is written, and the files are written into a hidden folder that is renamed into place,
so a failed export leaves the output folder as it was.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any, Callable, Dict, List

import torch
from omegaconf import OmegaConf
from safetensors.torch import save_file

from mvssl_plugin import provenance
from mvssl_plugin.config.beta import beta_of
from mvssl_plugin.config.views import views_of
from mvssl_plugin.data.pipeline import normalization
from mvssl_plugin.encoder.card import model_card
from mvssl_plugin.encoder.model import CARD, CONFIG, FORMAT, STANDARD, WEIGHTS, build_encoder_network
from mvssl_plugin.errors import ConfigError
from mvssl_plugin.eval.compare import is_evaluation
from mvssl_plugin.files import check_writable_folder, read_csv, read_json, write_json
from mvssl_plugin.registry import beta_slot
from mvssl_plugin.runs import KNN, METRICS, PROBE, RUN_LOG, run_files

#: datasets of small images: evaluated at their own size, no resize (solo-learn's pipelines)
SMALL_IMAGES = {"cifar10": 32, "cifar100": 32, "stl10": 96}


def shareable(text: Any) -> Any:
    """A path or command with no absolute path of the author's machine: each absolute path (a
    word, or the value after ``=``) cut to its last two parts, ``.../cifar10/train``."""
    if not isinstance(text, str):
        return text

    def cut(word: str) -> str:
        key, eq, value = word.rpartition("=") if "=" in word and not word.startswith("/") else ("", "", word)
        if value.startswith("/") and len(Path(value).parts) > 3:
            value = "/".join(["..."] + list(Path(value).parts[-2:]))
        return f"{key}{eq}{value}"

    return " ".join(cut(word) for word in text.split(" "))


def umask_mode() -> int:
    """The mode a new file gets from the user's umask (an export is meant to be shared)."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def check_output(out: Path, force: bool) -> None:
    """An output folder that exists and holds anything is refused unless ``force``."""
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out} is a file: name a folder")
    if out.is_dir() and any(out.iterdir()) and not force:
        raise ConfigError(f"--out {out} exists and is not empty: name a new folder, or add --force to replace it")
    check_writable_folder(out.parent if not out.exists() else out, f"--out {out}")


def read_checkpoint(ckpt: Path) -> Dict[str, torch.Tensor]:
    """The ``state_dict`` of a Lightning checkpoint (tensors only where torch can load it so)."""
    try:
        try:
            loaded = torch.load(ckpt, map_location="cpu", weights_only=True)
        except Exception:  # a checkpoint with pickled objects (solo-learn's own may carry some)
            loaded = torch.load(ckpt, map_location="cpu", weights_only=False)
    except Exception as err:
        raise ConfigError(
            f"{ckpt} is not a readable Lightning checkpoint ({type(err).__name__}): point at a pretraining "
            "run folder or one of its .ckpt files"
        ) from None
    if not isinstance(loaded, dict) or "state_dict" not in loaded:
        raise ConfigError(f"{ckpt} is not a Lightning checkpoint (no state_dict): point at a pretraining run")
    return loaded


def architecture(args: Dict[str, Any]) -> Dict[str, Any]:
    """config.json's ``architecture`` from a run's args.json, as solo-learn built it."""
    backbone, dataset = args.get("backbone", {}), args.get("data", {}).get("dataset")
    name, kwargs = backbone.get("name"), dict(backbone.get("kwargs") or {})
    if name == "narrow_resnet18":
        arch = {"name": name, "width": int(kwargs.get("width", 16)), "cifar_stem": bool(kwargs.get("small_input"))}
        first = kwargs.get("first_stage_width")
        # written only where it differs from width, so an older reader fails loudly on the weights' shapes
        if first is not None and int(first) != arch["width"]:
            arch["first_stage_width"] = int(first)
        return arch
    if name in STANDARD:  # solo-learn swaps in its CIFAR stem by the dataset, whatever the kwargs
        return {"name": name, "width": 64, "cifar_stem": dataset in ("cifar10", "cifar100")}
    raise ConfigError(f"backbone {name!r}: export knows narrow_resnet18, {', '.join(STANDARD)}")


def run_preprocessing(args: Dict[str, Any]) -> Dict[str, Any]:
    """How to feed the encoder: the run's normalisation (read off solo-learn's pipeline, as
    the run's own data path does) and the evaluation's resize and centre crop."""
    dataset, augs = args["data"]["dataset"], args["augmentations"]
    mean, std = normalization(dataset, OmegaConf.create(augs[0]))
    crop = SMALL_IMAGES.get(dataset, max(int(a["crop_size"]) for a in augs))
    resize = crop if dataset in SMALL_IMAGES else round(crop / 0.875)  # solo-learn: 256 then 224
    return {
        "resize": resize,
        "crop": crop,
        "mean": list(mean),
        "std": list(std),
        "scale": "[0, 1] then (x - mean) / std",
    }


def accuracies(folder: Path) -> List[Dict[str, Any]]:
    """Every accuracy measured on the run that its folder holds, each with its protocol."""
    found: List[Dict[str, Any]] = []
    rows = read_csv(folder / METRICS)
    for metric, protocol in (
        ("val_acc1", "solo-learn's online linear classifier (trained beside pretraining, detached)"),
        ("val_knn_acc1", "solo-learn's online kNN on the validation set"),
    ):
        values = [(r.get("epoch"), r[metric]) for r in rows if r.get(metric) not in (None, "")]
        if values:
            epoch, value = values[-1]
            found.append({"metric": metric, "top1": round(float(value), 2), "epoch": epoch, "protocol": protocol})
    knn = read_csv(folder / KNN)
    if knn:
        best = max(knn, key=lambda r: float(r["acc1"]))
        found.append(
            {
                "metric": "knn",
                "top1": float(best["acc1"]),
                "protocol": f"offline kNN (main_knn.py): {best['feature']} features, k = {best['k']}, "
                f"{best['distance']} distance, best of {len(knn)} settings",
            }
        )
    probe = read_json(folder / PROBE)
    if probe:
        found.append(
            {
                "metric": "linear_probe",
                "top1": round(float(probe["acc1"]), 2),
                "protocol": f"fast linear probe on cached features (main_linear.py with a probe recipe), "
                f"{probe.get('train_images')} training and {probe.get('test_images')} test images",
            }
        )
    return found


def training_record(args: Dict[str, Any], state: Dict[str, Any], folder: Path) -> Dict[str, Any]:
    """How the encoder was made: method, views, projector, beta, data, schedule, launches."""
    kwargs, data, optimizer = args.get("method_kwargs", {}), args.get("data", {}), args.get("optimizer", {})
    scheduler = args.get("scheduler") or {}
    views, step = views_of(args), int(state.get("global_step", 0))
    m = views.trained  # the views each image trained on (hard_views: its hardest of the m cut)
    devices = args.get("devices", 1)
    processes = (len(devices) if isinstance(devices, list) else int(devices or 1)) * int(args.get("num_nodes", 1))
    launches = (read_json(folder / RUN_LOG) or {}).get("launches", [])
    fraction = data.get("fraction", -1)
    return {
        "method": args.get("method"),
        "views": views.m,
        "views_trained": m,
        "proj_output_dim": kwargs.get("proj_output_dim"),
        "beta": beta_of(beta_slot(args.get("method")), kwargs),
        "beta_rule": kwargs.get("beta_rule"),
        "dataset": data.get("dataset"),
        "train_path": shareable(data.get("train_path")),
        "data_fraction": 1.0 if fraction in (None, -1) else fraction,
        "max_epochs": args.get("max_epochs"),
        "epochs_trained": int(state.get("epoch", -1)) + 1,
        "steps": step,
        "views_seen": step * int(optimizer.get("batch_size", 0)) * processes * m,
        "optimizer": {k: optimizer.get(k) for k in ("name", "lr", "batch_size", "weight_decay")},
        "scheduler": scheduler.get("name"),
        "lr_warmup_minutes": float(scheduler.get("warmup_minutes") or 0),  # scheduler.warmup_minutes
        "lr_tail_epochs": int(scheduler.get("tail_epochs") or 0),  # scheduler.tail_epochs
        "lr_tail_minutes": float(scheduler.get("tail_minutes") or 0),  # scheduler.tail_minutes
        "lr_cycle_minutes": float(scheduler.get("cycle_minutes") or 0),  # scheduler.cycle_minutes
        "precision": args.get("precision"),
        "run_name": args.get("name"),
        "commands": [shareable(launch.get("command")) for launch in launches],
        "plugin_version": next((x["plugin_version"] for x in reversed(launches) if x.get("plugin_version")), None),
        "plugin_commit": next((x.get("plugin_commit") for x in reversed(launches) if x.get("plugin_commit")), None),
    }


def export(source: str | Path, out: str | Path, force: bool = False, notify: Callable[[str], None] = print) -> Path:
    """Writes ``out/``: the backbone of the pretraining run (folder or .ckpt) ``source``."""
    out = Path(out)
    args_path, ckpt = run_files(source)
    args = read_json(args_path) or {}
    if is_evaluation(args):
        raise ConfigError(
            f"{source} is a linear-evaluation run, not a pretraining one: export the run it evaluated "
            f"({args.get('pretrained_feature_extractor')})"
        )
    check_output(out, force)
    arch = architecture(args)
    loaded = read_checkpoint(ckpt)
    weights = {k[len("backbone.") :]: v for k, v in loaded["state_dict"].items() if k.startswith("backbone.")}
    if not weights:
        raise ConfigError(f"{ckpt} holds no backbone.* weights: point at a pretraining run's checkpoint")
    model = build_encoder_network(arch)
    try:
        model.load_state_dict(weights, strict=True)
    except RuntimeError as err:
        first = str(err).splitlines()[1].strip() if len(str(err).splitlines()) > 1 else str(err)
        raise ConfigError(f"{ckpt}'s backbone does not match its args.json ({first})") from None
    folder = args_path.parent
    config = {
        "format": FORMAT,
        "architecture": {**arch, "num_features": int(getattr(model, "num_features", STANDARD.get(arch["name"], 0)))},
        "preprocessing": run_preprocessing(args),
        "training": training_record(args, loaded, folder),
        "accuracy": accuracies(folder),
        "source": {"run": folder.name, "checkpoint": Path(ckpt).name, "args": args_path.name},
        "exported_by": {"plugin_version": provenance.version(), "plugin_commit": provenance.commit()},
    }
    staging = out.parent / f".{out.name}.partial"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    try:
        save_file({k: v.detach().float().contiguous() for k, v in model.state_dict().items()}, str(staging / WEIGHTS))
        write_json(staging / CONFIG, config)
        (staging / CARD).write_text(model_card(config))
        for written in staging.iterdir():  # safetensors writes its file for its owner alone
            written.chmod(umask_mode())
        if out.exists():
            shutil.rmtree(out)  # only with --force (check_output): the new folder replaces it whole
        os.replace(staging, out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    notify(f"mvssl: exported {arch['name']} (width {arch['width']}) from {ckpt} to {out}")
    return out
