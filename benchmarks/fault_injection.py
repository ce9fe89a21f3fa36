"""Every class of bad input and bad run, through the entry points, on tiny generated data.

    python benchmarks/fault_injection.py [--out table.md] [--keep DIR]

Each case runs ``main_pretrain.py`` / ``main_linear.py`` / ``main_knn.py`` as a user would,
beside an earlier finished run in the same ``checkpoint.dir``, and prints one markdown row:
the outcome (a clear one-line error, or the run works), its exit status, the seconds from
launch to exit, and the files lost: files of the run folders present before the case and
missing after it (a checkpoint replaced by a newer complete one of the same run, as
solo-learn's ``keep_prev: false`` does, is not lost). A clear error is exit status 2
(config), 3 (non-finite loss) or 4 (data) with one ``mvssl ...`` line on stderr and no
traceback. About three minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional

REPO = Path(__file__).resolve().parents[1]

from mvssl_plugin.runs import is_complete_checkpoint  # noqa: E402
from mvssl_plugin.synthetic import tiny_overrides, write_image_folder  # noqa: E402

#: one torch thread: a shared 2-core machine otherwise spends most of a tiny run in OpenMP waits
ENV = dict(os.environ, PYTHONWARNINGS="ignore", OMP_NUM_THREADS="1")


@dataclass
class Outcome:
    case: str
    expected: str  # "clear error" or "works"
    status: int
    seconds: float
    stdout: str
    stderr: str
    lost: List[str]

    @property
    def outcome(self) -> str:
        lines = [line for line in self.stderr.splitlines() if line.startswith("mvssl ")]
        traceback = "Traceback" in self.stderr + self.stdout
        if self.status == 0:
            return "works"
        if self.status in (2, 3, 4) and len(lines) == 1 and not traceback:
            return "clear error"
        return f"UNCLEAR (exit {self.status})"

    @property
    def said(self) -> str:
        """The error line, or the notice the case is about."""
        lines = [line for line in self.stderr.splitlines() if line.startswith("mvssl ")]
        if lines:
            return lines[0]
        notices = [line for line in self.stdout.splitlines() if any(k in line for k in NOTICE_WORDS)]
        return notices[0].strip() if notices else ""


NOTICE_WORDS = ("warning:", "skipped unreadable", "resuming from", "sub-folders", "left out", "skip_bad_files")


def snapshot(root: Path) -> Dict[str, float]:
    """Every file under ``root`` (its run folders) with its modification time."""
    return {str(p.relative_to(root)): p.stat().st_mtime for p in root.rglob("*") if p.is_file()}


def lost_files(root: Path, before: Dict[str, float]) -> List[str]:
    after = snapshot(root)
    lost = []
    for name in before:
        if name in after:
            continue
        path = root / name
        replaced = name.endswith(".ckpt") and any(
            is_complete_checkpoint(p) for p in path.parent.glob("*.ckpt") if str(p.relative_to(root)) not in before
        )
        if not replaced:
            lost.append(name)
    return lost


def run(script: str, args: List[str], cwd: Path, timeout: int = 120) -> tuple[int, float, str, str]:
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, str(REPO / script), *args], cwd=cwd, env=ENV, capture_output=True, text=True, timeout=timeout
    )
    return done.returncode, time.perf_counter() - start, done.stdout, done.stderr


class Bench:
    def __init__(self, work: Path) -> None:
        self.work = work
        self.out = work / "runs"
        self.data = {
            "train": str(write_image_folder(work / "clean" / "train", per_class=8)),
            "test": str(write_image_folder(work / "clean" / "test", per_class=4, seed=1)),
        }
        self.results: List[Outcome] = []

    def pretrain_args(self, data: Optional[dict] = None, out: Optional[Path] = None, **extra) -> List[str]:
        return ["--config-name", "mabt_cifar.yaml", *tiny_overrides(data or self.data, out or self.out, **extra)]

    def linear_args(self, checkpoint: Path | str) -> List[str]:
        overrides = [
            o for o in tiny_overrides(self.data, self.out) if not o.startswith(("method_kwargs", "auto_resume"))
        ]
        return ["--config-name", "linear_cifar.yaml", f"pretrained_feature_extractor={checkpoint}", *overrides]

    def knn_args(self, checkpoint: Path | str) -> List[str]:
        data = ["--train_data_path", self.data["train"], "--val_data_path", self.data["test"]]
        return ["--pretrained_checkpoint_dir", str(checkpoint), "--dataset", "cifar10", "--num_workers", "0", *data]

    def case(
        self,
        name: str,
        expected: str,
        script: str,
        args: List[str],
        prepare: Optional[Callable] = None,
        out: Optional[Path] = None,
    ) -> Outcome:
        """Runs one case; ``out`` (default: the shared checkpoint.dir) is where files are counted."""
        if prepare is not None:
            prepare()
        out = out or self.out
        before = snapshot(out)
        status, seconds, stdout, stderr = run(script, args, self.work)
        result = Outcome(name, expected, status, seconds, stdout, stderr, lost_files(out, before))
        self.results.append(result)
        print(f"  {name}: {result.outcome}, exit {status}, {seconds:.1f} s", file=sys.stderr, flush=True)
        return result

    def bad_tree(self, name: str, which: str = "train") -> Path:
        """A copy of the clean data with its ``which`` folder (train/test) to be spoilt."""
        root = self.work / name
        shutil.copytree(self.work / "clean", root)
        return root

    def data_of(self, root: Path) -> dict:
        return {"train": str(root / "train"), "test": str(root / "test")}


def write_tiny(path: Path, size: int) -> None:
    import numpy as np
    from PIL import Image

    Image.fromarray(np.zeros((size, size, 3), dtype=np.uint8) + 90).save(path)


def corrupt_png(path: Path) -> None:
    """Header and end marker intact, pixel data not: passes the scan, fails at decode."""
    import numpy as np
    from PIL import Image

    Image.fromarray(np.random.default_rng(0).integers(0, 256, (32, 32, 3), dtype=np.uint8)).save(path)
    data = bytearray(path.read_bytes())
    start = data.index(b"IDAT") + 8
    data[start : start + 32] = bytes(b ^ 0x5A for b in data[start : start + 32])
    path.write_bytes(bytes(data))


def kill_during_epoch_1(bench: Bench, args: List[str]) -> None:
    """Starts a 3-epoch run and SIGKILLs it once its epoch 0 checkpoint is on disk."""
    earlier = set(bench.out.glob("mabt/*/*-ep=0.ckpt"))
    child = subprocess.Popen(
        [sys.executable, str(REPO / "main_pretrain.py"), *args],
        cwd=bench.work,
        env=ENV,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 180
    while (
        not set(bench.out.glob("mabt/*/*-ep=0.ckpt")) - earlier and time.monotonic() < deadline and child.poll() is None
    ):
        time.sleep(0.02)
    time.sleep(0.3)  # into epoch 1
    if child.poll() is not None:
        raise RuntimeError("the run to kill ended first: give it more images")
    child.send_signal(signal.SIGKILL)
    child.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, help="also write the table here")
    parser.add_argument("--keep", type=Path, help="work in this folder (kept) instead of a temporary one")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = args.keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        started = time.perf_counter()
        table = run_all(Bench(work))
        table += f"\n\nTotal {time.perf_counter() - started:.0f} s.\n"
    print(table)
    if args.out:
        args.out.write_text(table)


def run_all(bench: Bench) -> str:
    print("a finished run to keep safe...", file=sys.stderr, flush=True)
    status, _, _, stderr = run("main_pretrain.py", bench.pretrain_args(), bench.work)
    assert status == 0, stderr[-2000:]
    (first_run,) = (bench.out / "mabt").iterdir()
    case, pre = bench.case, bench.pretrain_args

    # config: numbers, paths, keys, memory
    case("bad number (optimizer.lr=-1)", "clear error", "main_pretrain.py", pre(**{"optimizer.lr": -1}))
    case("missing path (data.train_path)", "clear error", "main_pretrain.py", pre(**{"data.train_path": "/no/such"}))
    case("misspelt key (++method_kwargs.lamda)", "works", "main_pretrain.py", pre(**{"++method_kwargs.lamda": 0.1}))
    strict = {"++method_kwargs.lamda": 0.1, "+strict_keys": True}
    case("misspelt key, strict_keys=true", "clear error", "main_pretrain.py", pre(**strict))
    case(
        "absurd batch (optimizer.batch_size=100000)",
        "clear error",
        "main_pretrain.py",
        pre(**{"optimizer.batch_size": 100000}),
    )
    case("absurd views (data.num_views=100000)", "clear error", "main_pretrain.py", pre(**{"data.num_views": 100000}))
    case("NaN loss (optimizer.lr=1e30)", "clear error", "main_pretrain.py", pre(**{"optimizer.lr": 1e30}))

    # data
    for name, spoil in (
        ("zero-byte image", lambda d: (d / "train" / "class_0" / "empty.jpg").write_bytes(b"")),
        ("non-image file (.jpg)", lambda d: (d / "train" / "class_0" / "notes.jpg").write_text("not an image")),
        (
            "truncated JPEG",
            lambda d: truncate_copy(d / "train" / "class_0" / "0000.jpg", d / "train" / "class_0" / "cut.jpg"),
        ),
        ("corrupt image (valid header)", lambda d: corrupt_png(d / "train" / "class_0" / "broken.png")),
        ("tiny image (1x1) in the CIFAR val set", lambda d: write_tiny(d / "test" / "class_0" / "tiny.jpg", 1)),
    ):
        root = bench.bad_tree(name.split(" ")[0] + str(len(bench.results)))
        spoil(root)
        case(name, "clear error", "main_pretrain.py", pre(bench.data_of(root)))
    root = bench.bad_tree("tiny_train")
    write_tiny(root / "train" / "class_0" / "tiny.jpg", 1)
    case("tiny image (1x1) in the training set", "works", "main_pretrain.py", pre(bench.data_of(root)))
    root = bench.bad_tree("skip")
    (root / "train" / "class_0" / "empty.jpg").write_bytes(b"")
    case(
        "zero-byte image, data.skip_bad_files=true",
        "works",
        "main_pretrain.py",
        pre(bench.data_of(root), **{"data.skip_bad_files": True}),
    )
    root = bench.bad_tree("nested")
    nested = root / "train" / "class_2" / "more"
    nested.mkdir()
    shutil.move(str(root / "train" / "class_2" / "0000.jpg"), nested / "0000.jpg")
    case("nested class folder", "works", "main_pretrain.py", pre(bench.data_of(root)))

    # runs: kill -9 and resume, truncated checkpoint
    resume_data = {
        "train": str(write_image_folder(bench.work / "resume" / "train", per_class=24)),
        "test": bench.data["test"],
    }
    resume_args = pre(resume_data, max_epochs=3, **{"auto_resume.enabled": True, "name": "killed"})
    case(
        "kill -9 in epoch 1, then the same command",
        "works",
        "main_pretrain.py",
        resume_args,
        prepare=lambda: kill_during_epoch_1(bench, resume_args),
    )
    # a run folder of its own, so that the finished runs above are not the newest matching ones
    alone = bench.work / "runs_truncated"

    def truncate_only_checkpoint() -> None:
        copy = shutil.copytree(first_run, alone / "mabt" / first_run.name)
        (ckpt,) = copy.glob("*.ckpt")
        with open(ckpt, "r+b") as handle:
            handle.truncate(ckpt.stat().st_size // 2)

    truncated_args = pre(out=alone, **{"auto_resume.enabled": True})
    case(
        "truncated only checkpoint, auto_resume",
        "works",
        "main_pretrain.py",
        truncated_args,
        prepare=truncate_only_checkpoint,
        out=alone,
    )

    # evaluation on what is not a run
    not_ckpt = bench.work / "notes.ckpt"
    not_ckpt.write_text("not a checkpoint")
    empty = bench.work / "empty_run"
    empty.mkdir()
    case("main_linear on a non-checkpoint file", "clear error", "main_linear.py", bench.linear_args(not_ckpt))
    case("main_linear on an empty run folder", "clear error", "main_linear.py", bench.linear_args(empty))
    case("main_knn on a non-checkpoint file", "clear error", "main_knn.py", bench.knn_args(not_ckpt))
    case("main_knn on an empty run folder", "clear error", "main_knn.py", bench.knn_args(empty))
    return markdown(bench.results, bench.work)


def truncate_copy(source: Path, target: Path) -> None:
    data = source.read_bytes()
    target.write_bytes(data[: len(data) // 2])


def markdown(results: List[Outcome], work: Path) -> str:
    """The table; paths under the work folder are shown relative to it."""
    rows = [
        "| case | expected | outcome | exit | s to exit | files lost | what it said |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in results:
        said = r.said.replace(f"{work}/", "").replace("|", "\\|")
        said = said if len(said) <= 160 else said[:157] + "..."
        lost = ", ".join(r.lost) if r.lost else "0"
        rows.append(f"| {r.case} | {r.expected} | {r.outcome} | {r.status} | {r.seconds:.1f} | {lost} | {said} |")
    return "\n".join(rows)


if __name__ == "__main__":
    main()
