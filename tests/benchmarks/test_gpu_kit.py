"""The offline GPU kit (benchmarks/gpu/): parts and manifest, the runner's budget and resume state, a dry run.

No network: pack.py's wheel download is replaced by a fake one; everything else runs as on the target,
pip's offline install of solo-learn's wheel included.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import subprocess
import sys
import sysconfig
import tarfile
from pathlib import Path

import bench_pairs
import collect
import kit_needs
import kit_parts
import pack
import pytest
import runner
import runs_file
from helpers import REPO, make_image_folder
from leaderboard_plan import record_lines

from mvssl_plugin.cli.config_name import compose_recipe
from mvssl_plugin.files import read_csv

KIT = REPO / "benchmarks" / "gpu"
SOLO = REPO.parent / "shared" / "solo-learn"  # the snapshot solo-learn is installed from


def run_runner(*args: str, timeout: int = 240) -> subprocess.CompletedProcess:
    """The runner's command line, as on the device machine (its own process, its own signals)."""
    env = {k: v for k, v in os.environ.items() if k not in ("WANDB_SERVICE", "WANDB_DIR")}
    env["PYTHONWARNINGS"] = "ignore"
    return subprocess.run(
        [sys.executable, str(KIT / "runner.py"), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=REPO,
    )


def read_archive(out: Path) -> dict[str, bytes]:
    """The newest results archive under ``out``: {path below its top folder: bytes}."""
    newest = sorted(out.glob("results-*.tar.gz"))[-1]
    with tarfile.open(newest) as tar:
        return {m.name.split("/", 1)[1]: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}


def tree(root: Path, files: dict[str, bytes]) -> list[tuple[Path, str]]:
    """Writes ``files`` under ``root``: the (file, name in the kit) pairs pack.py hands to write_parts."""
    pairs = []
    for name, data in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
        pairs.append((root / name, name))
    return pairs


def test_parts_travel_over_calls_and_install_once_all_are_kept(tmp_path: Path) -> None:
    """A kit cut into parts: a call that lacks one part (and gets another damaged) keeps what is good
    and installs nothing; the next call brings the rest and the kit is joined, checked and unpacked."""
    files = {f"data/imgs/train/c{c}/{i}.jpg": os.urandom(700) for c in range(2) for i in range(4)}
    files["src/solo-learn/main_pretrain.py"] = b"print('solo')\n"
    kit = tmp_path / "kit"
    kit.mkdir()
    manifest = kit_parts.write_parts(tree(tmp_path / "staging", files), kit, part_bytes=1000)
    manifest.update(wheels=[], data={"root": "imgs"})
    (kit / "manifest.json").write_text(json.dumps(manifest))
    assert len(manifest["parts"]) >= 5 and all(p["bytes"] <= 1000 for p in manifest["parts"])
    whole = b"".join((kit / p["name"]).read_bytes() for p in manifest["parts"])
    assert hashlib.sha256(whole).hexdigest() == manifest["sha256"] and len(whole) == manifest["bytes"]

    later, prefix = tmp_path / "later", tmp_path / "prefix"
    later.mkdir()
    (kit / "part-002.bin").rename(later / "part-002.bin")  # not carried by the first call
    good = (kit / "part-001.bin").read_bytes()
    (kit / "part-001.bin").write_bytes(b"x" + good[1:])  # damaged on the way
    report: dict = {"install": [], "kit_bad": []}
    kit_parts.receive(kit, prefix, report)
    assert len(report["kit_bad"]) == 1 and report["kit_bad"][0].startswith("part-001.bin: sha256")
    assert kit_parts.install_kits(prefix, report) is None  # nothing installed: no data yet
    (step,) = report["install"]
    assert step["missing"] == ["part-001.bin", "part-002.bin"] and step["status"].startswith("waiting: carry")

    for part in manifest["parts"]:  # the second call carries only what is missing
        (kit / part["name"]).unlink(missing_ok=True)
    (kit / "part-001.bin").write_bytes(good)
    (later / "part-002.bin").rename(kit / "part-002.bin")
    report = {"install": [], "kit_bad": []}
    kit_parts.receive(kit, prefix, report)
    assert kit_parts.install_kits(prefix, report) == str(prefix / "data" / "imgs")
    assert report["install"][0]["status"] == "installed" and report["kit_bad"] == []
    for name, data in files.items():
        assert (prefix / name).read_bytes() == data
    report = {"install": [], "kit_bad": []}
    kit_parts.install_kits(prefix, report)
    assert report["install"][0]["status"] == "installed before"

    # a kept part damaged on disk is caught when the parts are joined
    home = next((prefix / "kits").iterdir())
    stamp = json.loads((prefix / "stamp.json").read_text())
    (prefix / "stamp.json").write_text(json.dumps({"kits": {}}))
    (home / "part-000.bin").write_bytes(b"y" + (home / "part-000.bin").read_bytes()[1:])
    report = {"install": [], "kit_bad": []}
    kit_parts.install_kits(prefix, report)
    assert "the joined parts' sha256" in report["install"][0]["status"] and home.name in stamp["kits"]


def test_pack_decides_what_to_pack_and_builds_a_kit_with_an_injected_download(tmp_path: Path) -> None:
    have = kit_needs.parse_have("torch==2.11 torchvision lightning==2.6 timm scipy")
    keep, notes = kit_needs.to_pack(kit_needs.NEEDED, have)
    names = [n.name for n in keep]
    assert "lightning" in names  # the target's 2.6 is not the pinned 2.1.2
    assert "scipy" not in names  # any version does
    assert any(n.startswith("pack lightning==2.1.2: the target has 2.6") for n in notes)
    assert len(kit_needs.UMAP_NEEDED) == 44 and len(kit_needs.DALI_NEEDED) == 11
    assert all("==" in n.requirement and n.module for n in kit_needs.UMAP_NEEDED + kit_needs.DALI_NEEDED)

    def fake_download(needs: list, dest: Path, python: str, platforms: list) -> None:
        for need in needs:
            (dest / f"{need.name.replace('-', '_')}-{need.version}-py3-none-any.whl").write_bytes(
                need.requirement.encode()
            )

    data = tmp_path / "imgs"
    for split, n in (("train", 10), ("test", 4)):
        for c in range(3):
            tree(data / split / f"c{c}", {f"{i}.jpg": b"jpeg%d" % i for i in range(n)})
    (data / ".cache").mkdir()  # a hidden folder beside the splits is no split
    manifest = pack.build_kit(tmp_path / "kit", 0.001, keep, data=data, fraction=0.5, download=fake_download)
    assert manifest["wheels"] == [[n.requirement, n.module, n.policy] for n in keep]
    assert len(manifest["wheel_files"]) == len(keep)
    assert manifest["data"] == {"root": "imgs", "images": {"test": 6, "train": 15}, "fraction": 0.5}
    assert json.loads((tmp_path / "kit" / "manifest.json").read_text())["sha256"] == manifest["sha256"]
    assert "part-000.bin" in pack.describe(manifest)
    # same inputs, same bytes: a re-pack keeps the runner's stamp valid
    again = pack.build_kit(tmp_path / "kit2", 0.001, keep, data=data, fraction=0.5, download=fake_download)
    assert again["sha256"] == manifest["sha256"]
    dali = pack.build_kit(tmp_path / "dali", 1, kit_needs.DALI_NEEDED, download=fake_download)
    assert "data" not in dali and [w[0] for w in dali["wheels"]][0] == "nvidia-dali-cuda130==2.4.0"


def test_runs_files_parse_and_name_existing_recipes() -> None:
    runs = runs_file.parse_runs("all: a=1 +b.c=2 x=0\none: main_pretrain.py --config-name r.yaml x=5 {data}/t\n")
    assert runs == [("one", ["main_pretrain.py", "--config-name", "r.yaml", "x=5", "{data}/t", "a=1", "+b.c=2"])]
    assert runs_file.merge(["b.c=1", "k=2"], ["+b.c=9"]) == ["+b.c=9", "k=2"]
    with pytest.raises(SystemExit):
        runs_file.parse_runs("a: x\na: y\n")
    dropped = runs_file.parse_runs("all: a=1\none: x\nall:\ntwo: y --flag 3\nall: b=2\nthree: z\n")
    assert dropped == [("one", ["x", "a=1"]), ("two", ["y", "--flag", "3"]), ("three", ["z", "b=2"])]
    three = runs_file.parse_runs("a: x\nb: y\nc: z\n")
    assert [n for n, _ in runs_file.select_runs(three, ["b"])] == ["a", "c"]
    assert [n for n, _ in runs_file.select_runs(three, [], ["c", "a"])] == ["a", "c"]  # the file's order
    for skip, only in ((["dali"], None), ([], ["dali"])):
        with pytest.raises(SystemExit, match="no run named"):  # a typo must not run the whole list
            runs_file.select_runs(three, skip, only)
    for path in sorted((KIT / "runs").glob("*.txt")):
        parsed = runs_file.parse_runs(path.read_text())
        assert parsed, path
        for name, tokens in parsed:
            assert (REPO / tokens[0]).is_file(), (path.name, name)  # the runner runs <repo>/<script>.py
            if tokens[0] == "benchmarks/kill_resume.py":  # makes its own data and folders
                continue
            if tokens[0] == "benchmarks/bench_pairs.py":  # its own recipes; its rows into the run's folder
                assert "--csv" in tokens and tokens[tokens.index("--csv") + 1].startswith("{out}/"), (path.name, name)
                continue
            if tokens[1:2] == ["{prefix}/src/solo-learn/main_umap.py"]:  # argparse flags: no Hydra override
                assert all("=" not in t for t in tokens), (path.name, name)
                trained = tokens[tokens.index("--pretrained_checkpoint_dir") + 1]
                assert trained.startswith("{run:") and trained[5:-1] in [n for n, _ in parsed], (path.name, name)
                continue
            recipe = tokens[tokens.index("--config-name") + 1]
            if tokens[0] == "main_pretrain.py":
                assert (REPO / "scripts" / "pretrain" / "cifar10" / recipe).is_file(), (path.name, name)
            else:  # solo-learn's own script through solo_script.py, with its own recipe
                assert tokens[:2] == ["benchmarks/gpu/solo_script.py", "{prefix}/src/solo-learn/main_pretrain.py"]
                folder = tokens[tokens.index("--config-path") + 1].replace("{prefix}/src/solo-learn", str(SOLO))
                assert not SOLO.is_dir() or (Path(folder) / recipe).is_file(), (path.name, name)
            assert "checkpoint.dir={out}" in tokens and "auto_resume.enabled=true" in tokens, (path.name, name)


def test_the_gpu_time_to_accuracy_list_runs_each_methods_cpu_pick() -> None:
    """Each line of ``runs/speedrun.txt`` is its method's leaderboard record line (the pick chosen on
    the CPU's split) with the GPU's budget, seed and logging: a pick that moves on the CPU moves here."""
    parsed = dict(runs_file.parse_runs((KIT / "runs" / "speedrun.txt").read_text()))
    screens = read_csv(REPO / "benchmarks" / "results" / "leaderboard" / "screens.csv")
    budget = ("max_epochs=", "epoch_knn.", "seed=", "wandb.", "+wandb.")
    lines = {}
    for line in record_lines(screens):
        tag, args = line.split("|")
        if tag.endswith("-s1"):
            lines[f"gpu-own-clock-{tag.split('-')[1]}"] = [a for a in args.split() if not a.startswith(budget)]
    assert sorted(parsed) == sorted(lines) and len(lines) == 7
    for name, pick in lines.items():
        tokens = parsed[name]
        assert tokens[0] == "main_pretrain.py" and tokens[1 : 1 + len(pick)] == pick, name
        # as the runner fills it in; Hydra takes every override (a "~" deletion and a merge included)
        filled = [t.replace("{data}", "/data").replace("{out}", "/out") for t in tokens[3:]]
        cfg = compose_recipe(tokens[2], "pretrain", filled)
        assert (cfg.accelerator, cfg.precision, cfg.epoch_knn.stop_after_minutes) == ("gpu", "bf16-mixed", 3), name
        assert (cfg.data.train_path, cfg.checkpoint.dir, cfg.optimizer.name) == ("/data/train", "/out", "adam"), name


def test_a_line_naming_an_earlier_run_gets_its_folder_or_waits(tmp_path: Path) -> None:
    tokens = ["solo_script.py", "main_umap.py", "--pretrained_checkpoint_dir", "{run:memory-m2}"]
    assert runs_file.fill_runs(tokens, tmp_path) == (tokens, ["memory-m2"])
    run = tmp_path / "memory-m2" / "mabt" / "abc123"
    run.mkdir(parents=True)
    (run / "args.json").write_text("{}")
    assert runs_file.fill_runs(tokens, tmp_path)[1] == ["memory-m2"]  # no checkpoint yet: still waits
    (run / "last.ckpt").write_bytes(b"")
    assert runs_file.fill_runs(tokens, tmp_path) == (tokens[:3] + [str(run)], [])


@pytest.mark.slow
def test_budget_cuts_a_run_and_the_next_call_resumes_it(tmp_path: Path) -> None:
    # "slow" works on its second attempt (a marker left in its folder by the first stands for a checkpoint)
    # and ignores SIGINT, so the runner has to go on to SIGTERM
    runs = tmp_path / "runs.txt"
    runs.write_text(
        'slow: python -c "import os, signal, time; signal.signal(signal.SIGINT, signal.SIG_IGN); '
        "os.path.exists('marker') and exit(0); open('marker', 'w').close(); time.sleep(60)\"\n"
        'bad: python -c "raise SystemExit(3)"\n'
        "quick: python -c \"open('result.json', 'w').write('{}')\"\n"
        'later: python -c "print(1)" {data}/train\n'
    )
    prefix, out = tmp_path / "prefix", tmp_path / "out"
    common = ["--kit", str(tmp_path / "nokit"), "--runs", str(runs), "--prefix", str(prefix), "--out", str(out)]
    common += ["--skip-env-check", "--grace-s", "1", "--reserve-s", "0", "--min-run-s", "1"]

    first = run_runner(*common, "--budget-s", "7")
    assert "run slow: unfinished" in first.stdout, first.stdout + first.stderr
    report = json.loads(read_archive(out)["runner.json"])
    assert [(r["name"], r["status"], r["cut_by_budget"], r["exit_code"]) for r in report["runs"]] == [
        ("slow", "unfinished", True, -15)  # SIGINT ignored, SIGTERM ended it
    ]

    second = run_runner(*common, "--budget-s", "60")
    assert second.returncode == 1  # "bad" failed
    state = json.loads((prefix / "state.json").read_text())["runs"]
    assert {n: (e["status"], e["attempts"]) for n, e in state.items()} == {
        "slow": ("done", 2),
        "bad": ("failed", 1),
        "quick": ("done", 1),
    }
    assert "run later: the data is not installed yet, skipped" in second.stdout
    files = read_archive(out)
    assert "runs/quick/result.json" in files and "logs/slow/attempt-2.log" in files

    # collect.py: the two calls' archives -> one row per run, its newest attempt
    rows = {r["run"]: r for r in collect.rebuild_from(sorted(out.glob("results-*.tar.gz")), tmp_path / "collected")}
    assert {n: (r["status"], r["exit_code"]) for n, r in rows.items()} == {
        "slow": ("pass", 0),
        "bad": ("fail", 3),
        "quick": ("pass", 0),
    }
    assert (tmp_path / "collected" / "logs" / "slow" / "attempt-2.log").is_file()
    assert "| bad | fail |" in (tmp_path / "collected" / "summary.md").read_text()

    third = run_runner(*common, "--budget-s", "60")
    assert "run slow: done before, skipped" in third.stdout and "run bad: failed before, skipped" in third.stdout
    assert json.loads(read_archive(out)["runner.json"])["runs"] == []
    fourth = run_runner(*common, "--budget-s", "60", "--retry-failed")
    assert [r["name"] for r in json.loads(read_archive(out)["runner.json"])["runs"]] == ["bad"]
    assert fourth.returncode == 1


@pytest.mark.slow
def test_dry_run_end_to_end(tmp_path: Path) -> None:
    """The GPU path on this CPU: a tiny kit (solo-learn's wheel and source, a 3-class ImageFolder)
    in 40 KiB parts; a first call without one part installs nothing and starts no run, the next
    brings it, pip installs offline, the tiny list trains and comes back in the archive."""
    prefix, out, kit, later = tmp_path / "prefix", tmp_path / "out", tmp_path / "kit", tmp_path / "later"
    manifest = pack.tiny_kit(kit, SOLO)
    assert len(manifest["parts"]) >= 3 and all(p["bytes"] <= 0.04 * (1 << 20) for p in manifest["parts"])
    later.mkdir()
    (kit / "part-001.bin").rename(later / "part-001.bin")
    # a budget and a timeout that a busy 2-core machine meets (idle, the whole test takes under a minute)
    common = ["--dry-run", "--kit", str(kit), "--prefix", str(prefix), "--out", str(out), "--budget-s", "450"]
    first = run_runner(*common, "--skip-env-check", timeout=600)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "waiting: carry part-001.bin" in first.stdout and "the data is not installed yet" in first.stdout
    assert json.loads(read_archive(out)["runner.json"])["runs"] == []

    for part in kit.glob("part-*.bin"):
        part.unlink()
    (later / "part-001.bin").rename(kit / "part-001.bin")
    done = run_runner(*common, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    files = read_archive(out)
    report = json.loads(files["runner.json"])
    assert report["device"] == "cpu" and report["dry_run"] is True and not report["env"].get("failed")
    (step,) = report["install"]
    assert step["status"] == "installed" and step["data"] == "tiny"
    if SOLO.is_dir():  # pip installed solo-learn's wheel, and the runs import it from the kit's site
        assert step["pip"] == ["solo-learn"] and str(prefix / "site" / "solo") in report["env"]["solo"]
    assert [(r["name"], r["status"], r["exit_code"]) for r in report["runs"]] == [("tiny-mabt", "done", 0)]
    run_files = {Path(name).name for name in files if name.startswith("runs/tiny-mabt/")}
    assert {"args.json", "metrics.csv", "run.json"} <= run_files
    assert not any(name.endswith(".ckpt") for name in files)
    assert "val_knn_acc1" in files[next(n for n in files if n.endswith("metrics.csv"))].decode().splitlines()[0]
    assert "logs/tiny-mabt/attempt-1.log" in files and "state.json" in files

    # collect.py: the tiny run's row, its step time and throughput from metrics.csv and args.json
    (row,) = collect.rebuild_from(sorted(out.glob("results-*.tar.gz")), tmp_path / "collected")
    assert (row["run"], row["status"], row["epochs"], row["batch"], row["views"]) == ("tiny-mabt", "pass", 1, 8, 4)
    step_s = float(row["step_s"])
    # throughputs are written as whole numbers: equal to batch / step within that rounding, at any speed
    assert step_s > 0 and abs(float(row["images_per_s"]) - 8 / step_s) <= 0.5 + 8 / step_s * 1e-3
    assert abs(float(row["views_per_s"]) - 32 / step_s) <= 0.5 + 32 / step_s * 1e-3
    assert 0 < float(row["data_wait_fraction"]) < 1 and float(row["peak_memory_mib"]) > 100
    assert row["device"] == "cpu" and row["knn_acc1"] != "" and row["error"] == ""

    again = run_runner(*common, "--skip-env-check", timeout=600)
    assert "installed before" in again.stdout and "run tiny-mabt: done before, skipped" in again.stdout, again.stdout


def test_collect_refuses_what_is_not_a_runner_archive(tmp_path: Path) -> None:
    bogus = tmp_path / "results-1.tar.gz"
    with tarfile.open(bogus, "w:gz") as tar:
        tar.add(__file__, arcname="results-1/notes.txt")
    with pytest.raises(SystemExit, match="no runner.json"):
        collect.main([str(bogus), "--into", str(tmp_path / "into")])
    with pytest.raises(SystemExit, match="no such archive"):
        collect.main([str(tmp_path / "missing.tar.gz"), "--into", str(tmp_path / "into")])
    assert not (tmp_path / "into" / "runs.csv").exists()


@pytest.mark.slow
def test_solo_script_gives_solo_learn_scripts_the_plugin_as_installed(tmp_path: Path) -> None:
    """On the GPU machine the checkout is on PYTHONPATH, not installed, so no .pth is read;
    ``python -S`` with the packages on PYTHONPATH stands for that here. A stand-in for solo-learn's
    main_pretrain.py sees the plugin's methods only when started through solo_script.py."""
    script = tmp_path.resolve() / "main_standin.py"
    script.write_text(
        "import json, sys\nimport solo.methods\n"
        "print(json.dumps({'mabt': 'mabt' in solo.methods.METHODS, 'argv': sys.argv, 'path0': sys.path[0]}))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "MVSSL_PLUGIN_AUTOREGISTER"}
    # solo-learn's own folder too: an editable install of it (pip install -e, as its developers have
    # it) is found through a path hook that python -S never runs
    import solo

    solo_root = str(Path(solo.__file__).resolve().parents[1])
    paths = [sysconfig.get_paths()["purelib"], solo_root, str(REPO)]
    env.update(PYTHONPATH=os.pathsep.join(paths), PYTHONWARNINGS="ignore")

    def run(*argv: str) -> dict:
        done = subprocess.run([sys.executable, "-S", *argv], capture_output=True, text=True, env=env, timeout=240)
        assert done.returncode == 0, done.stderr[-3000:]
        return json.loads(done.stdout.strip().splitlines()[-1])

    assert run(str(script), "a=1")["mabt"] is False  # as the kit's PYTHONPATH has it: no hook
    seen = run(str(KIT / "solo_script.py"), str(script), "method=mabt", "--config-name", "barlow.yaml")
    assert seen == {
        "mabt": True,
        "argv": [str(script), "method=mabt", "--config-name", "barlow.yaml"],
        "path0": str(script.parent),
    }
    done = subprocess.run([sys.executable, str(KIT / "solo_script.py"), "no-script"], capture_output=True, text=True)
    assert done.returncode != 0 and "usage: solo_script.py" in done.stderr


@pytest.mark.slow
def test_bench_pairs_times_each_pair_side_by_side_and_states_its_verdict(tmp_path: Path, monkeypatch) -> None:
    """The three pairs, shrunk to a CPU (width-8 backbone, d = 16, batch 8): a row each, its
    medians, their ratio and the verdict against the issue's target."""
    monkeypatch.delenv("CIFAR10_DIR", raising=False)  # its main sets it: undone after the test
    data = tmp_path / "cifar"
    make_image_folder(data / "train", per_class=20)  # 7 batches of 8: 3 warm-up steps, 2 timed, 1 more
    tiny = ["accelerator=cpu", "precision=32", "backbone.name=narrow_resnet18", "+backbone.kwargs.width=8"]
    tiny += ["method_kwargs.proj_output_dim=16", "method_kwargs.proj_hidden_dim=16", "optimizer.batch_size=8"]
    out = tmp_path / "pairs.csv"
    argv = ["--data", str(data), "--steps", "2", "--rounds", "1", "--csv", str(out), "--set", *tiny]
    bench_pairs.main(argv)
    rows = {r["pair"]: r for r in csv.DictReader(out.open())}
    assert set(rows) == {"bt", "views", "data"}
    for row in rows.values():
        a, b = float(row["a_s_per_step"]), float(row["b_s_per_step"])
        assert a > 0 and b > 0 and float(row["ratio"]) == pytest.approx(a / b, abs=1e-3)
        limit = float(row["target"].removeprefix("<= "))
        assert row["verdict"] == ("meets" if a / b <= limit else "misses"), row
        assert row["steps"] == "2" and row["device"].startswith("cpu") and "data.format=memory" in row["overrides"]
    assert rows["data"]["b"].endswith("(one fixed batch)") and rows["bt"]["b"] == "method=barlow_twins"
    with pytest.raises(SystemExit, match="3 batches in data.fraction=0.5 at this batch size, 6 needed"):
        bench_pairs.main(["--pairs", "views", "--data", str(data), "--fraction", "0.5", "--steps", "2", "--set", *tiny])


def test_a_call_that_could_start_no_run_fails_before_installing_anything(tmp_path: Path, monkeypatch) -> None:
    """On the H200 (2026-11-26) ``--budget-s 115`` spent 20 s of the lease on the import check and
    then started nothing: the default grace (45 s), kill waits and reserve left less than
    ``--min-run-s``. Such a call, or one whose ``--skip`` names no run, now stops at once."""
    runs = tmp_path / "runs.txt"
    runs.write_text('one: python -c "print(1)"\n')
    prefix = tmp_path / "prefix"
    common = ["--kit", str(tmp_path / "nokit"), "--runs", str(runs), "--prefix", str(prefix), "--out", str(tmp_path)]
    short = run_runner(*common, "--budget-s", "115", "--min-run-s", "35")
    assert short.returncode == 2 and "Give --budget-s 145 or more" in short.stderr, short.stderr
    typo = run_runner(*common, "--budget-s", "600", "--skip", "onee")
    assert typo.returncode != 0 and "no run named ['onee']" in typo.stderr, typo.stderr
    assert not prefix.exists() and not list(tmp_path.glob("results-*"))  # nothing installed, no archive
    smi = tmp_path / "bin" / "nvidia-smi"  # without the import check the device comes from nvidia-smi
    smi.parent.mkdir()
    smi.write_text("#!/bin/sh\necho 'NVIDIA H200'\n")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{smi.parent}{os.pathsep}{os.environ['PATH']}")
    fits = run_runner(*common, "--budget-s", "150", "--min-run-s", "35", "--skip-env-check")
    assert fits.returncode == 0 and "run one: done" in fits.stdout, fits.stdout + fits.stderr
    assert json.loads(read_archive(tmp_path)["runner.json"])["device"] == "NVIDIA H200"


def test_the_recorded_commit_says_when_the_tree_differs_from_it(tmp_path: Path) -> None:
    """The device's ``.git`` can lag the tree sent with a call: ``+dirty`` says the code that ran
    is not HEAD's (untracked files, like the carried kit, do not count)."""
    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(git[:3] + ["init", "-q"], check=True)
    (tmp_path / "a.py").write_text("x = 1\n")
    subprocess.run(git + ["add", "a.py"], check=True)
    subprocess.run(git + ["commit", "-qm", "a"], check=True)
    head = subprocess.run(git[:3] + ["rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    (tmp_path / "kit.bin").write_text("untracked")
    assert pack.repo_commit(tmp_path) == head
    (tmp_path / "a.py").write_text("x = 2\n")
    assert pack.repo_commit(tmp_path) == head + "+dirty"
    assert collect.short_commit(head + "+dirty") == head[:12] + "+dirty"


def test_bench_pairs_keeps_each_row_when_a_later_pair_is_cut(tmp_path: Path, monkeypatch) -> None:
    """The kit's budget stops a run with SIGINT: the pairs measured before it must be in the csv
    (on the H200, 2026-11-26, a cut in the third pair lost the two finished ones)."""
    data = tmp_path / "cifar"
    (data / "train").mkdir(parents=True)
    monkeypatch.delenv("CIFAR10_DIR", raising=False)

    def fake_pair(name: str, *args: object) -> dict:
        if name == "views":
            raise KeyboardInterrupt
        return {
            "pair": name,
            "a_s_per_step": 0.1,
            "b_s_per_step": 0.1,
            "ratio": 1.0,
            "target": "<= 1.02",
            "verdict": "meets",
        }

    monkeypatch.setattr(bench_pairs, "time_pair", fake_pair)
    out = tmp_path / "pairs.csv"
    with pytest.raises(KeyboardInterrupt):
        bench_pairs.main(["--pairs", "bt", "views", "--data", str(data), "--csv", str(out)])
    assert [r["pair"] for r in csv.DictReader(out.open())] == ["bt"]


def test_archives_sort_as_the_calls_were_made_and_none_replaces_another(tmp_path: Path, monkeypatch) -> None:
    prefix, out = tmp_path / "prefix", tmp_path / "out"
    prefix.mkdir()
    now = [0.0]
    monkeypatch.setattr(runner.time, "time", lambda: now[0])
    paths = []
    for call, when in enumerate([1795000000.5, 1795000000.9, 1795000000.9], start=1):  # the last two: one ms
        now[0] = when
        paths.append(runner.write_archive(out, prefix, {"runs": [], "call": call}))
    stamp = runner.time.strftime("%Y%m%d-%H%M%S", runner.time.gmtime(1795000000))
    assert [p.name for p in paths] == [
        f"results-{stamp}-500.tar.gz",
        f"results-{stamp}-900.tar.gz",
        f"results-{stamp}-900-2.tar.gz",
    ]
    with tarfile.open(paths[2]) as tar:
        (member,) = [m for m in tar.getmembers() if m.name.endswith("runner.json")]
        assert json.loads(tar.extractfile(member).read())["call"] == 3


def test_two_parts_and_the_checkout_fit_in_one_device_call(tmp_path):
    """A device call carries the checkout too: a committed benchmark checkpoint (carry/, up to
    16 MiB) leaves less room for the kit's parts, and the default part size shrinks with it."""
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / ".gitignore").write_text("ignored.bin\n")
    (tmp_path / "tracked.bin").write_bytes(b"x" * (3 << 20))
    (tmp_path / "new.bin").write_bytes(b"x" * (1 << 20))  # untracked, not ignored: the device copies it
    (tmp_path / "ignored.bin").write_bytes(b"x" * (40 << 20))
    subprocess.run(["git", "-C", str(tmp_path), "add", "tracked.bin", ".gitignore"], check=True)
    tree = pack.tree_mib(tmp_path)
    assert 4.0 <= tree < 4.01
    assert pack.part_mib_for(tree) == 24.0 and pack.part_mib_for(19.0) == 18.0
    for tree in (2.8, 12.7, 19.0, 30.0):
        assert 2 * pack.part_mib_for(tree) + tree <= pack.CALL_MIB - pack.SPARE_MIB
