"""The leaderboard's records, reported: each record's reading on its own clock, ours set against the
best peer recorded on the same CPU kind, the README's headline table and the curves' plots
(``python benchmarks/leaderboard.py report`` calls :func:`report_records`; the plans and what a
record is: ``leaderboard_plan.py`` and ``leaderboard.py``'s docstring)."""

from __future__ import annotations

from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from doc_blocks import replace_between, write_table
from leaderboard_plan import FP32, METHODS, RECORD_MINUTES, RECORD_RECIPES, RECORD_SEEDS
from own_clock import record, within

from mvssl_plugin.eval.time_to_accuracy import stays_at_or_above
from mvssl_plugin.files import read_csv, read_json, write_csv
from mvssl_plugin.runs import EPOCH_KNN

OUT = Path(__file__).resolve().parent / "results" / "leaderboard"
REPO = Path(__file__).resolve().parents[1]
RECORDS_START = (
    "<!-- leaderboard records: made by `python benchmarks/leaderboard.py report` from results/leaderboard -->"
)
RECORDS_END = "<!-- end of the leaderboard records -->"
#: the README's headline: the comparison with the best peer in short, a row per recipe
README = REPO / "README.md"
VERSUS_START = "<!-- ours against the best tuned peer: made by `python benchmarks/leaderboard.py report` -->"
VERSUS_END = "<!-- end of ours against the best tuned peer -->"


def loss_precision(folder: Path) -> str:
    """The precision a run's loss ran at: ``fp32``, or ``bf16`` where a peer's ran inside bf16 autocast
    (``performance.loss_fp32`` unset or false under ``bf16-mixed``; ours compute theirs in float32
    unless it is false)."""
    args = read_json(folder / "args.json")
    asked = (args.get("performance") or {}).get("loss_fp32")
    ours = args["method"] in {m.key for m in METHODS if m.ours}
    mixed = str(args.get("precision", "32")).startswith(("bf16", "16"))
    return "fp32" if not mixed or (ours if asked is None else asked) else str(args["precision"]).split("-")[0]


def against_best_peer(
    rows: Sequence[Dict[str, object]], curves: Dict[str, List[Dict[str, str]]]
) -> Tuple[Dict[str, object], List[Dict[str, object]]]:
    """The records' comparison on one CPU kind: the best of solo-learn's methods by its mean final
    test kNN over its records on it (``{}``: none recorded), and for each record of ours, the
    training minutes and the epoch from which its curve stays at or above that kNN (``None``: it
    does not), set against the peer's mean minutes and epochs."""
    ours = {m.key for m in METHODS if m.ours}
    by_setting: Dict[str, List[Dict[str, object]]] = {}
    for r in rows:
        by_setting.setdefault(str(r["setting"]), []).append(r)
    peers = {k: v for k, v in by_setting.items() if k.split("-")[0] not in ours}
    # at ours' loss precision (float32) where a peer was recorded at it on this kind
    same = {k: v for k, v in peers.items() if all(r.get("loss") == "fp32" for r in v)}
    peers = same or peers
    if not peers:
        return {}, []
    best = max(peers, key=lambda k: sum(float(r["final_knn"]) for r in peers[k]) / len(peers[k]))
    runs = peers[best]

    def mean(column: str) -> float:
        return sum(float(r[column]) for r in runs) / len(runs)

    peer = {"setting": best, "records": len(runs), "knn": mean("final_knn"), "minutes": mean("train_minutes"),
            "epochs": mean("epochs"), "loss": runs[0].get("loss", "")}  # fmt: skip
    versus = []
    for r in rows:
        if str(r["setting"]).split("-")[0] not in ours:
            continue
        curve = curves[str(r["run"])]
        at = stays_at_or_above([float(c["knn_val_acc1"]) for c in curve], float(peer["knn"]))
        versus.append({"run": r["run"], "setting": r["setting"], "train_minutes": r["train_minutes"],
                       "minutes": None if at is None else float(curve[at]["train_seconds"]) / 60,
                       "epoch": None if at is None else int(curve[at]["epoch"]) + 1})  # fmt: skip
    return peer, versus


def versus_lines(peer: Dict[str, object], versus: Sequence[Dict[str, object]]) -> List[str]:
    """The comparison in full: the peer, then one line per record of ours."""
    level, minutes = float(peer["knn"]), float(peer["minutes"])
    lines = [
        f"the best of solo-learn's methods recorded on it: {peer['setting']}, {level:.2f}% test kNN after "
        f"{minutes:.1f} training minutes and {peer['epochs']:g} epochs (mean of {peer['records']} record(s))"
    ]
    for v in versus:
        if v["minutes"] is None:
            lines.append(f"{v['run']}: does not stay at or above {level:.2f}% within its {v['train_minutes']} minutes")
            continue
        t = float(v["minutes"])
        lines.append(  # time = epochs x pace: the epochs are the part a slower or faster VM hour cannot move
            f"{v['run']}: stays at or above {level:.2f}% from {t:.1f} training minutes: {minutes / t:.2f}x less "
            f"time; from its epoch {v['epoch']}, against the peer's {peer['epochs']:g}"
        )
    return lines


HEADLINE_HEAD = [
    "| recipe | CPU kind | loss | min to 60% (per seed) | 65% | 70% | test kNN at its end "
    "| stays at or above the best peer's kNN at its end |",
    "|---|---|---|---|---|---|---|---|",
]


def headline_rows(
    kind: str, rows: Sequence[Dict[str, object]], beyond: Sequence[Dict[str, object]],
    peer: Dict[str, object], versus: Sequence[Dict[str, object]],
    long_peer: Optional[Dict[str, object]] = None, long_versus: Sequence[Dict[str, object]] = (),
) -> List[str]:  # fmt: skip
    """The README's table: one row per recipe (``RECORD_RECIPES``) with records on this kind, its seeds
    side by side ("-": not within its budget; a recipe with a tail read over its whole budget, the
    others over ``RECORD_MINUTES``), and for ours how much sooner each seed stays at or above the best
    peer's kNN ("never": it does not): a recipe with a tail against ``long_peer``, the best peer
    recorded with the same tail over its whole budget, where the kind has one. A peer recorded with
    its loss in float32 is its recipe with ``+performance.loss_fp32=true``, a row of its own."""
    whole = {str(r["run"]): r for r in beyond}
    sooner = {str(v["run"]): v for v in [*versus, *long_versus]}
    by_setting: Dict[str, List[Dict[str, object]]] = {}
    for r in rows:
        if str(r["setting"]).removesuffix(f"-{FP32}") in RECORD_RECIPES:
            long = "-tail" in str(r["setting"])
            by_setting.setdefault(str(r["setting"]), []).append(whole.get(str(r["run"]), r) if long else r)

    def first_to_60(runs: List[Dict[str, object]]) -> float:
        return min((float(str(r["min_to_60"])) for r in runs if r["min_to_60"] not in ("", None)), default=1e9)

    out = []
    for setting, runs in sorted(by_setting.items(), key=lambda kv: (first_to_60(kv[1]), kv[0])):
        runs = sorted(runs, key=lambda r: int(str(r["seed"])))
        cells = [" / ".join(str(r[f"min_to_{t}"] or "-") for r in runs) for t in (60, 65, 70)]
        cells.append(" / ".join(f"{float(r['final_knn']):.2f}" for r in runs))
        than = long_peer if long_peer and "-tail" in setting else peer
        if setting in (peer.get("setting"), (long_peer or {}).get("setting")):
            cells.append("(the best peer)")
        elif any(str(r["run"]) in sooner for r in runs) and than:
            each = [sooner.get(str(r["run"]), {}).get("minutes") for r in runs]
            less = " / ".join("never" if t is None else f"{float(than['minutes']) / float(t):.2f}x" for t in each)
            cells.append(f"{less} sooner than {than['setting']} ({than['loss']} loss, {float(than['knn']):.2f}%)")
        else:
            cells.append("-")
        base = setting.removesuffix(f"-{FP32}")
        recipe = f"`{RECORD_RECIPES[base]}`" + (" `+performance.loss_fp32=true`" if base != setting else "")
        out.append(f"| {recipe} | {kind} | {runs[0]['loss']} | " + " | ".join(cells) + " |")
    return out


def beyond_line(r: Dict[str, object]) -> str:
    """A record trained on past ``RECORD_MINUTES``: where it ends, and the 65% and 70% targets."""
    to = ", ".join(f"{t}% from {r[f'min_to_{t}']} minutes" if r[f"min_to_{t}"] else f"{t}% not within them"
                   for t in (65, 70))  # fmt: skip
    at_60 = f"; {float(r['knn_at_60_min']):.2f}% at 60 minutes" if r["knn_at_60_min"] not in ("", None) else ""
    return (f"{r['run']}: {float(r['final_knn']):.2f}% test kNN after {r['train_minutes']} training minutes and "
            f"{r['epochs']} epochs; stays at or above {to}{at_60}")  # fmt: skip


def plot_records(
    rows: Sequence[Dict[str, object]], curves: Dict[str, List[Dict[str, str]]], path: Path, cpu: str
) -> None:
    """Test kNN against training minutes on one CPU kind, one line per record (colour: setting; dashed: seed 2)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    settings = sorted({str(r["setting"]) for r in rows})
    for r in rows:
        curve = curves[str(r["run"])]
        style = "-" if str(r["seed"]) == str(RECORD_SEEDS[0]) else "--"
        label = str(r["setting"]) if style == "-" else None
        ax.plot([float(c["train_seconds"]) / 60 for c in curve], [float(c["knn_val_acc1"]) for c in curve], style,
                color=f"C{settings.index(str(r['setting']))}", label=label, marker=".")  # fmt: skip
    ax.set_xlabel("training minutes (the run's own clock)")
    ax.set_ylabel("backbone kNN on the test set (%)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(f"each method's pick, tuned alike on the holdout split (dashed: seed 2)\n{cpu}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def report_records(out: Path = OUT, pages: Sequence[Path] = (), headline_pages: Sequence[Path] = (README,)) -> str:
    """``records.csv`` (every record, its ``machine``) and ``records.md`` in ``out``, from the records
    collected in ``out/records/<machine_key>``: per CPU kind, its table, then its records of ours
    against the best peer recorded on that kind, and ``records_<machine_key>.png``. The tables go
    between the records' markers of each page in ``pages``; the comparisons in short (a row per
    setting of ours and CPU kind, not the readings past ``RECORD_MINUTES``) between the headline
    markers of each page in ``headline_pages``."""
    everything, longer, lines, headline = [], [], [], []
    for kind in sorted(p for p in (out / "records").glob("*") if p.is_dir()):
        rows, curves, beyond, whole = [], {}, [], {}
        for knn in sorted(kind.glob(f"*/{EPOCH_KNN}")):
            setting = knn.parent.name[len("record-") :].rsplit("-s", 1)[0]
            stop = (read_json(knn.parent / "args.json").get("epoch_knn") or {}).get("stop_after_minutes")
            trained_on = stop is not None and float(stop) > RECORD_MINUTES
            rows.append({"machine": kind.name, "setting": setting, "loss": loss_precision(knn.parent),
                         **record(knn.parent, RECORD_MINUTES if trained_on else None)})  # fmt: skip
            curve = read_csv(knn)
            curves[knn.parent.name] = within(curve, RECORD_MINUTES) if trained_on else curve
            whole[knn.parent.name] = curve
            if trained_on:
                beyond.append({"machine": kind.name, "setting": setting, "loss": loss_precision(knn.parent),
                               **record(knn.parent)})  # fmt: skip
        if not rows:
            continue
        cpu = " / ".join(sorted({str(r["cpu"]) for r in rows}))
        lines += [f"On {cpu}:", "",
                  "| method | setting | loss | seed | epochs | training min | test kNN at the end "
                  "| min to 50% | 55% | 60% |", "|---|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
        for r in sorted(rows, key=lambda r: (-float(r["final_knn"]), str(r["run"]))):
            to = [r[f"min_to_{t}"] or "-" for t in (50, 55, 60)]
            lines.append(f"| {r['method']} | {r['setting']} | {r['loss']} | {r['seed']} | {r['epochs']} "
                         f"| {r['train_minutes']} | {float(r['final_knn']):.2f} "
                         f"| {' | '.join(map(str, to))} |")  # fmt: skip
        peer, versus = against_best_peer(rows, curves)
        # the records with the lr's tail, over their whole budget, against a peer given the same tail
        long_peer, long_versus = against_best_peer([r for r in beyond if "-tail" in str(r["setting"])], whole)
        if peer:
            head, *each = versus_lines(peer, versus)
            lines += ["", f"On {cpu}, against {head}:", "", *[f"- {v}" for v in each], ""]
            headline += headline_rows(kind.name, rows, beyond, peer, versus, long_peer, long_versus)
        else:
            lines += ["", f"On {cpu}: no record of a peer yet.", ""]
        if beyond:
            lines += [f"Trained on past {RECORD_MINUTES:g} minutes (a constant lr: the rows above are these runs "
                      f"read as their first {RECORD_MINUTES:g} minutes):", ""]  # fmt: skip
            lines += [f"- {beyond_line(r)}" for r in beyond] + [""]
        if long_peer:
            head, *each = versus_lines(long_peer, long_versus)
            lines += [f"On {cpu}, over the whole budget with the lr's tail, against {head}:", ""]
            lines += [f"- {v}" for v in each] + [""]
        plot_records(rows, curves, out / f"records_{kind.name}.png", cpu)
        everything += rows
        longer += beyond
    write_csv(out / "records.csv", everything)
    if longer:
        write_csv(out / "beyond.csv", longer)
    table = "\n".join(lines).rstrip() + "\n"
    write_table(table, out / "records.md", pages, RECORDS_START, RECORDS_END)
    block = HEADLINE_HEAD + headline if headline else ["No record of a peer yet."]
    for page in headline_pages:
        page.write_text(replace_between(page.read_text(), VERSUS_START, VERSUS_END, block))
    return table
