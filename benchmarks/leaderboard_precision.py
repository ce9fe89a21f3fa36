"""Each pick's loss both ways, in float32 and inside bf16 autocast: does the precision alone move it?

    python benchmarks/leaderboard.py precision [--seed 1]   # "tag|arguments" lines: each pick, bf16 then float32

The records set ours (loss in float32, as they ship) against solo-learn's methods (loss inside
autocast, as they ship, unless ``records --loss-fp32``). A pair here runs a pick's record recipe
for 3 epochs on the split (``data.holdout=5000``, no test set; the screens' length), once with
``performance.loss_fp32=false`` and once ``true``, back to back on one CPU, one seed. The report
sets the difference in holdout kNN after each epoch beside two yardsticks of noise: the spread of
the same setting's record seeds after the same epoch (their test kNN, on any CPU kind: a curve per
epoch does not depend on the kind), and the pick's own screen, the same line at the precision
the method ships with (bf16 for solo-learn's, float32 for ours), seed and split, run before on
another machine: one arm run twice. And the epoch's seconds of the two. ``collect`` copies the pairs into
``precision/<machine_key>``; ``report`` writes precision.md.
"""

from __future__ import annotations

from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from leaderboard_plan import HOLDOUT, METHODS, picks, record_recipe, screen_of

from mvssl_plugin.files import read_csv, read_json
from mvssl_plugin.runs import EPOCH_KNN

EPOCHS = 3
#: the seed the screens ran (``leaderboard_plan.Screen.arguments``)
SCREEN_SEED = "1"
PRECISIONS = ("bf16", "fp32")


def precision_tag(method: str, precision: str, seed: int) -> str:
    """``precision-barlow-bf16-s1``: ``method``'s pick with its loss in ``precision``."""
    return f"precision-{method}-{precision}-s{seed}"


def precision_of(tag: str) -> Optional[Tuple[str, str, str]]:
    """The (method, precision, seed) a ``precision_tag`` names, or None."""
    head, method, precision, seed = (tag.split("-") + ["", "", "", ""])[:4]
    known = {m.key for m in METHODS}
    if head != "precision" or method not in known or precision not in PRECISIONS or not seed[1:].isdigit():
        return None
    return method, precision, seed[1:]


def precision_lines(rows: Sequence[Dict[str, object]], seed: int = 1) -> List[str]:
    """``tag|arguments``: each method's pick (its record recipe) for ``EPOCHS`` epochs on the split,
    its loss in bf16, then in float32."""
    lines = []
    for pick in picks(rows).values():
        method = _key(pick)
        recipe = record_recipe(str(pick["tag"]))
        args = (
            f"--config-name {recipe} max_epochs={EPOCHS} seed={seed} data.holdout={HOLDOUT} data.val_path=null "
            "epoch_knn.enabled=true epoch_knn.stop_after_minutes=null"
        )
        for precision in PRECISIONS:
            fp32 = str(precision == "fp32").lower()
            lines.append(f"{precision_tag(method, precision, seed)}|{args} ++performance.loss_fp32={fp32}")
    return lines


def _key(pick: Dict[str, object]) -> str:
    """The leaderboard's key of a pick's method (``barlow`` for solo-learn's ``barlow_twins``)."""
    screen = screen_of(str(pick["tag"]))
    assert screen is not None, pick
    return screen.method.key


def _curve(folder: Path, column: str) -> List[float]:
    return [float(r[column]) for r in read_csv(folder / EPOCH_KNN)] if (folder / EPOCH_KNN).is_file() else []


def _epoch_seconds(folder: Path) -> float:
    rows = read_csv(folder / EPOCH_KNN)
    return float(rows[-1]["train_seconds"]) / len(rows)


def seed_spread(records: Path, setting: str, epoch: int) -> Optional[Tuple[float, float]]:
    """(lowest, highest) test kNN after ``epoch`` over ``setting``'s records on every CPU kind, its
    loss as the method ships (None: fewer than two)."""
    values = []
    for folder in sorted(records.glob(f"*/record-{setting}-s*")):
        curve = _curve(folder, "knn_val_acc1")
        if len(curve) > epoch:
            values.append(curve[epoch])
    return (min(values), max(values)) if len(values) >= 2 else None


def report_precision(out: Path, screens: Sequence[Dict[str, object]]) -> str:
    """precision.md in ``out``: per CPU kind, each pair's holdout kNN after every epoch both ways,
    the difference after the last beside the record seeds' spread, and float32's epoch time against bf16's."""
    chosen = {_key(p): str(p["tag"]) for p in picks(screens).values()}
    lines: List[str] = []
    for kind in sorted(p for p in (out / "precision").glob("*") if p.is_dir()):
        runs = {precision_of(f.name): f for f in sorted(kind.iterdir()) if precision_of(f.name)}
        model = next(iter(read_json(f / "machine.json")["model"] for f in runs.values()), kind.name)
        lines += [
            f"On {model} ({kind.name}), {EPOCHS} epochs on the split, bf16 then float32 back to back per seed:",
            "",
            "| method | setting | seed | holdout kNN per epoch, loss in bf16 | in float32 | float32 - bf16 after "
            f"epoch {EPOCHS} | record seeds after epoch {EPOCHS} (test set) | its screen, as the method ships "
            "(the same arm run before) | float32's epoch time / bf16's |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for (method, precision, seed), bf16 in sorted(runs.items()):
            fp32 = runs.get((method, "fp32", seed))
            if precision != "bf16" or fp32 is None:
                continue
            low, high = _curve(bf16, "knn_holdout_acc1"), _curve(fp32, "knn_holdout_acc1")
            if len(low) < EPOCHS or len(high) < EPOCHS:
                continue
            setting = chosen[method]
            screen = next(r for r in screens if r["tag"] == setting)
            if seed == SCREEN_SEED:
                ships = "fp32" if screen_of(setting).method.ours else "bf16"  # type: ignore[union-attr]
                again = float(screen["holdout_knn"]) - (high if ships == "fp32" else low)[-1]
                screen_text = f"{float(screen['holdout_knn']):.2f} ({ships}; {again:+.2f})"
            else:  # the screens ran one seed: another seed's arm is not a rerun of it
                screen_text = f"- (the screens ran seed {SCREEN_SEED})"
            spread = seed_spread(out / "records", setting, EPOCHS - 1)
            spread_text = (
                "-" if spread is None else f"{spread[0]:.2f} to {spread[1]:.2f} ({spread[1] - spread[0]:.2f} apart)"
            )
            gap = high[-1] - low[-1]
            ratio = _epoch_seconds(fp32) / _epoch_seconds(bf16)
            lines.append(
                f"| {method} | {setting} | {seed} | {' '.join(f'{v:.2f}' for v in low)} | "
                f"{' '.join(f'{v:.2f}' for v in high)} | {gap:+.2f} | {spread_text} | {screen_text} | {ratio:.2f}x |"
            )
        lines.append("")
    table = "\n".join(lines)
    (out / "precision.md").write_text(table)
    return table
