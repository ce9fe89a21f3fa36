"""The paper's mechanism at CPU scale: dimensional collapse with a small projector and a fixed
small beta (the rule keeps the rank), and more views per image at equal wall-clock.

    python benchmarks/cpu_mechanism_study.py --out benchmarks/results/cpu_mechanism [--parts scale pdim views]

Every run is ``main_pretrain.py --config-name mabt_cifar_cpu.yaml`` (width-16 ResNet-18, 10% of
the CIFAR-10 training JPEGs, batch 128) stopped after a number of optimizer steps
(Lightning's ``max_steps``). Budgets are in steps, not seconds, so that other work on the
machine cannot bias a comparison: the views part gives every m the same number of views
(m x steps constant), which is equal wall-clock up to the per-step overhead, since a step's
cost grows with the views it forwards; the measured training seconds are recorded beside.
Then, in this process, the run's checkpoint is loaded
and its backbone and projector embed the 5,000 training images (the kNN bank, plain val
transform) and the 10,000 test images: kNN top-1 on the real test split (solo-learn's
WeightedKNNClassifier, k = 20, cosine, T = 0.07) and RankMe of the test embeddings.

Parts:
- ``scale``: m = 2, d = 256, beta by the rule, for 20 to 160 steps (``--scale-steps``), against the same
  network at random initialisation: the smallest budget at which pretraining beats random
  init by more than the seed spread.
- ``pdim``: d in {32, 64, 256, 1024}, beta by the rule vs the fixed beta the rule gives at
  d = 8192 (3.3 / 8192), m = 2.
- ``views``: m in {2, 4, 8}, d = 256, beta by the rule, the same number of views each.
- ``epochs``: m in {2, 4, 8} for the same number of steps, so the same epochs (the paper's
  x-axis): each m sees every image as often, m views each time.
- ``data``: the data claim, 2 views x 100%, 4 x 50%, 8 x 25% of the 5,000-image subset
  (``data.fraction`` 0.1, 0.05, 0.025 of the training set: solo-learn's stratified subsets),
  at equal optimizer steps (``--data-steps``) and at equal views processed (m x steps =
  2 x ``--data-steps`` x 2). The kNN bank is the 5,000-image subset for every run.
- ``mmcr``: ``method=mmcr`` (the plugin's third method) at m in {2, 4, 8}, d = 256, the views
  part's equal-views budget, to set beside the mabt rows.

A point whose run already exists in results.csv under another part (same method, d, m, beta,
steps, fraction and seed) is copied, not re-run.

Each point is run for every ``--seeds``; ``results.csv`` gets one row per run (appended, so
parts can run in separate calls), ``summary.md`` and the plots are rebuilt from all rows.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import torch

from mvssl_plugin.files import read_csv, write_csv

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data" / "cifar10"
RECIPE = "mabt_cifar_cpu.yaml"
FIXED_LAMB = 3.3 / 8192  # the rule's beta at d = 8192, m = 2
BANK_FRACTION = 0.1  # the recipe's 5,000 training images: the kNN bank of every run


def run_name(part: str, d: int, m: int, beta: str, steps: int, seed: int, fraction: float = 0.1, method="mabt") -> str:
    name = f"{part}-d{d}-m{m}-{beta}-{steps}steps-seed{seed}"
    if fraction != 0.1:
        name = name.replace(f"-{steps}steps", f"-frac{fraction:g}-{steps}steps")
    return name if method == "mabt" else f"{method}-{name}"


def pretrain(
    out: Path, name: str, d: int, m: int, beta: str, steps: int, seed: int, fraction: float = 0.1, method="mabt"
) -> Path:
    """One pretraining run of ``steps`` optimizer steps; returns its run folder."""
    runs = out / "runs" / name
    overrides = [
        f"method={method}",
        f"data.train_path={DATA / 'train'}",
        "data.val_path=null",
        f"data.fraction={fraction}",
        f"data.num_views={m}",
        f"method_kwargs.proj_output_dim={d}",
        f"method_kwargs.lamb={'auto' if beta == 'rule' else FIXED_LAMB}",
        "max_epochs=1000",
        f"+max_steps={steps}",
        f"seed={seed}",
        f"checkpoint.dir={runs}",
        "auto_resume.enabled=false",
        "wandb.enabled=false",
    ]
    command = [sys.executable, str(REPO / "main_pretrain.py"), "--config-name", RECIPE, *overrides]
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    log = out / "logs" / f"{name}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "w") as handle:
        handle.write(" ".join(command) + "\n")
        handle.flush()
        subprocess.run(command, stdout=handle, stderr=subprocess.STDOUT, env=env, check=True, cwd=REPO)
    (folder,) = (runs / method).iterdir()
    return folder


def random_init(out: Path, name: str, d: int, m: int, seed: int):
    """The recipe's network at initialisation (built as main_pretrain.py would build it)."""
    from mvssl_plugin.cli.config_name import compose_recipe
    from mvssl_plugin.train.pretrain import build_pretrain_model

    overrides = [
        f"data.train_path={DATA / 'train'}",
        "data.val_path=null",
        f"data.num_views={m}",
        f"method_kwargs.proj_output_dim={d}",
        f"seed={seed}",
    ]
    cfg, model = build_pretrain_model(compose_recipe(RECIPE, "pretrain", overrides), notify=lambda _: None)
    return model.eval(), cfg


def evaluate(model, cfg) -> dict:
    """kNN top-1 on the test split and RankMe of the test embeddings, backbone and projector."""
    from omegaconf import OmegaConf
    from solo.data.classification_dataloader import prepare_transforms
    from torch.utils.data import DataLoader

    from mvssl_plugin.data.labelled_sets import classification_datasets
    from mvssl_plugin.eval.features import extract_features
    from mvssl_plugin.eval.knn import knn_grid
    from mvssl_plugin.eval.rankme import rankme

    data_cfg = OmegaConf.create(
        {
            "data": {
                "dataset": "cifar10",
                "train_path": str(DATA / "train"),
                "val_path": str(DATA / "test"),
                "format": "image_folder",
            }
        }
    )
    _, t_val = prepare_transforms("cifar10")
    train_set, test_set = classification_datasets(data_cfg, t_val, t_val, BANK_FRACTION)
    device = torch.device("cpu")
    features = {
        name: extract_features(model, DataLoader(dataset, batch_size=512, num_workers=2), device)
        for name, dataset in (("train", train_set), ("test", test_set))
    }
    rows = knn_grid(
        features["train"], features["test"], ("backbone", "projector"), [20], ["cosine"], [0.07], report=lambda _: None
    )
    result = {f"knn_{r['feature']}": r["acc1"] for r in rows}
    result["rank_backbone"] = round(rankme(features["test"]["backbone"]), 2)
    result["rank_projector"] = round(rankme(features["test"]["projector"]), 2)
    return result


LOSS_COLUMNS = ("train_barlow_loss", "train_mmcr_loss", "train_vicreg_loss")


def trained_facts(folder: Path) -> dict:
    rows = read_csv(folder / "metrics.csv")
    last = rows[-1] if rows else {}
    return {
        "epochs": int(last.get("epoch", -1)) + 1,
        "steps_done": int(last.get("step", 0)),
        "train_seconds": float(last.get("train_seconds", 0.0)),
        "final_loss": next((float(v) for k, v in last.items() if k in LOSS_COLUMNS and v != ""), ""),
    }


def plan(
    parts: list[str], seeds: list[int], pdim_steps: int, views_steps: int, scale_steps: list[int], data_steps: int = 80
) -> list[dict]:
    """The runs of the chosen parts; ``views_steps`` is the m = 2 budget (m = 4, 8 get 1/2, 1/4)."""
    points = []
    if "epochs" in parts:
        for m in (2, 4, 8):
            points.append(dict(part="epochs", d=256, m=m, beta="rule", steps=data_steps))
    if "data" in parts:
        for m, fraction in ((2, 0.1), (4, 0.05), (8, 0.025)):
            points.append(dict(part="data-steps", d=256, m=m, beta="rule", steps=data_steps, fraction=fraction))
            steps = data_steps * 4 // m  # m x steps = 4 x data_steps views per image slot
            points.append(dict(part="data-views", d=256, m=m, beta="rule", steps=steps, fraction=fraction))
    if "mmcr" in parts:
        for m in (2, 4, 8):
            points.append(dict(part="views", d=256, m=m, beta="none", steps=views_steps * 2 // m, method="mmcr"))
    if "scale" in parts:
        points += [dict(part="scale", d=256, m=2, beta="random-init", steps=0)] if 0 in scale_steps else []
        for steps in [s for s in scale_steps if s > 0]:
            points += [dict(part="scale", d=256, m=2, beta="rule", steps=steps)]
    if "pdim" in parts:
        for d in (32, 64, 256, 1024):
            for beta in ("rule", "fixed"):
                points.append(dict(part="pdim", d=d, m=2, beta=beta, steps=pdim_steps))
    if "views" in parts:
        for m in (2, 4, 8):
            points.append(dict(part="views", d=256, m=m, beta="rule", steps=views_steps * 2 // m))
    defaults = {"fraction": 0.1, "method": "mabt"}
    return [{**defaults, **p, "seed": seed} for p in points for seed in seeds]


SAME_RUN = ("method", "d", "m", "beta", "steps", "fraction", "seed")


def earlier_run(rows: list[dict], point: dict) -> dict | None:
    """A row of results.csv from a run of exactly this point's settings (rows written before
    the method and fraction columns were mabt runs on fraction 0.1)."""
    for row in rows:
        values = {**{"method": "mabt", "fraction": "0.1"}, **{k: v for k, v in row.items() if v != ""}}
        if all(str(values.get(k)) == str(point[k]) for k in SAME_RUN):
            return row
    return None


def spread(values: list[float]) -> str:
    mean = statistics.mean(values)
    return f"{mean:.2f} ({min(values):.2f}-{max(values):.2f})" if len(values) > 1 else f"{mean:.2f}"


def summarize(out: Path) -> None:
    rows = read_csv(out / "results.csv")
    groups = defaultdict(list)
    for row in rows:
        method, fraction = row.get("method") or "mabt", float(row.get("fraction") or 0.1)
        groups[(row["part"], method, int(row["d"]), int(row["m"]), row["beta"], fraction, int(row["steps"]))].append(
            row
        )
    columns = ("knn_backbone", "knn_projector", "rank_backbone", "rank_projector", "train_seconds")
    lines = [
        "| part | method | d | m | beta | data | lamb | steps | seeds | " + " | ".join(columns) + " |",
        "|" + "---|" * (9 + len(columns)),
    ]
    for key in sorted(groups):
        group = groups[key]
        cells = [spread([float(r[c]) for r in group]) for c in columns]
        part, method, d, m, beta, fraction, steps = key
        share = f"{fraction / 0.1:.0%}"
        lines.append(
            f"| {part} | {method} | {d} | {m} | {beta} | {share} | {group[0]['lamb']} | {steps} | {len(group)} | "
            + " | ".join(cells)
            + " |"
        )
    (out / "summary.md").write_text(
        "Mean over seeds (min-max) per point; kNN top-1 (%) on the 10,000 test images, RankMe of the test "
        "embeddings. Written by benchmarks/cpu_mechanism_study.py from results.csv.\n\n" + "\n".join(lines) + "\n"
    )
    plot(out, groups)


def plot(out: Path, groups: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def series(part: str, beta: str, axis: int, column: str):
        keys = sorted(k for k in groups if k[0] == part and k[4] == beta and k[1] == "mabt")
        xs = [k[axis] for k in keys]
        values = [[float(r[column]) for r in groups[k]] for k in keys]
        return xs, [statistics.mean(v) for v in values], [min(v) for v in values], [max(v) for v in values]

    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    for beta, style in (("rule", "o-"), ("fixed", "s--")):
        for ax, column, title in (
            (axes[0], "rank_projector", "projector RankMe"),
            (axes[1], "rank_backbone", "backbone RankMe"),
            (axes[2], "knn_backbone", "kNN top-1 (backbone), %"),
        ):
            xs, mean, low, high = series("pdim", beta, 2, column)
            if xs:
                ax.plot(xs, mean, style, label=f"beta: {beta}")
                ax.fill_between(xs, low, high, alpha=0.2)
                ax.set_xscale("log", base=2)
                ax.set_xlabel("projector d")
                ax.set_title(title)
    axes[0].legend()
    fig.suptitle("CPU scale, m = 2, equal steps: beta by the rule vs fixed 3.3/8192 (min-max over seeds)")
    fig.tight_layout()
    fig.savefig(out / "pdim.png", dpi=110)
    plt.close(fig)

    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    for ax, column, title in (
        (axes[0], "knn_backbone", "kNN top-1 (backbone), %"),
        (axes[1], "rank_projector", "projector RankMe"),
        (axes[2], "train_seconds", "training seconds (measured)"),
    ):
        xs, mean, low, high = series("views", "rule", 3, column)
        if xs:
            ax.plot(xs, mean, "o-")
            ax.fill_between(xs, low, high, alpha=0.2)
            ax.set_xlabel("views per image m")
            ax.set_xticks(xs)
            ax.set_title(title)
    fig.suptitle("CPU scale, d = 256, beta by the rule, equal number of views (min-max over seeds)")
    fig.tight_layout()
    fig.savefig(out / "views.png", dpi=110)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "cpu_mechanism")
    choices = ["scale", "pdim", "views", "epochs", "data", "mmcr"]
    parser.add_argument("--parts", nargs="+", default=["scale", "pdim", "views"], choices=choices)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--scale-steps", type=int, nargs="+", default=[0, 20, 40, 80], help="0: random init")
    parser.add_argument("--pdim-steps", type=int, default=80)
    parser.add_argument("--views-steps", type=int, default=120, help="the m = 2 budget; m views get 2/m of it")
    parser.add_argument(
        "--data-steps", type=int, default=80, help="the equal-steps budget of the data and epochs parts"
    )
    parser.add_argument("--summarize-only", action="store_true")
    args = parser.parse_args()
    import logging
    import warnings

    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    args.out.mkdir(parents=True, exist_ok=True)
    if not args.summarize_only:
        for point in plan(args.parts, args.seeds, args.pdim_steps, args.views_steps, args.scale_steps, args.data_steps):
            name = run_name(**{k: point[k] for k in ("part", "d", "m", "beta", "steps", "seed", "fraction", "method")})
            rows = read_csv(args.out / "results.csv")
            done = earlier_run(rows, point)
            if done is not None:
                row = {**done, **point, "copied_from": done.get("copied_from") or done["part"]}
                print(f"{name}: the same run as an earlier {row['copied_from']} row, copied", flush=True)
                write_csv(args.out / "results.csv", rows + [row])
                continue
            start = time.perf_counter()
            if point["beta"] == "random-init":
                model, cfg = random_init(args.out, name, point["d"], point["m"], point["seed"])
                facts = {"epochs": 0, "steps_done": 0, "train_seconds": 0.0, "final_loss": ""}
            else:
                from mvssl_plugin.eval.features import load_pretrained

                settings = {k: point[k] for k in ("d", "m", "beta", "steps", "seed", "fraction", "method")}
                folder = pretrain(args.out, name, **settings)
                model, cfg, _ = load_pretrained(folder)
                facts = trained_facts(folder)
            lamb = cfg.method_kwargs.get("lamb") if point["method"] != "mmcr" else None
            row = {
                **point,
                "lamb": round(float(lamb), 6) if lamb is not None else "",
                **facts,
                **evaluate(model, cfg),
                "wall_seconds": round(time.perf_counter() - start, 1),
                "load_average_1min": round(os.getloadavg()[0], 2),  # other work on the machine, if any
            }
            print(row, flush=True)
            write_csv(args.out / "results.csv", read_csv(args.out / "results.csv") + [row])
    summarize(args.out)
    print((args.out / "summary.md").read_text())


if __name__ == "__main__":
    main()
