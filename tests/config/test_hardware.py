"""Every CPU: no configuration hits torch's oneDNN channels-last fault, and CPU runs share
the cores between torch's threads and the loader workers. Through main_pretrain.py."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch
from helpers import run_entry, tiny_overrides

from mvssl_plugin.config.hardware import fused_on_cpu, plan_cpu_threads, usable_cores
from mvssl_plugin.files import read_json
from mvssl_plugin.runs import ARGS

#: what makes oneDNN pick its AVX2 kernels on any x86 CPU (an AVX-512 one included)
AVX2_ONLY = {"DNNL_MAX_CPU_ISA": "AVX2", "ATEN_CPU_CAPABILITY": "avx2", "OMP_NUM_THREADS": "1"}


def pretrain(data: dict, out, env=None, fresh=False, **extra):
    out.mkdir(parents=True, exist_ok=True)
    args = ["--config-name", "mabt_cifar.yaml", *tiny_overrides(data, out, **extra)]
    return run_entry("main_pretrain.py", args, out, env=env, fresh=fresh)


@pytest.mark.slow
def test_a_width_4_backbone_trains_contiguous_where_channels_last_would_corrupt_memory(tiny_cifar, tmp_path):
    """Width 4 channels-last aborts with "double free or corruption" on its first backward
    under AVX2-only oneDNN; the run goes contiguous, says so, and records it."""
    result = pretrain(tiny_cifar, tmp_path, env=AVX2_ONLY, **{"+backbone.kwargs.width": 4})
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    notices = [line for line in result.stdout.splitlines() if "channels-last is off on the CPU" in line]
    assert len(notices) == 1 and "backbone.kwargs.width" in notices[0]
    (run_dir,) = (tmp_path / "mabt").iterdir()
    assert read_json(run_dir / ARGS)["performance"]["disable_channel_last"] is True


CANARY = """import torch
from mvssl_plugin.backbones.narrow_resnet import NarrowResNet18
model = NarrowResNet18(width=4).to(memory_format=torch.channels_last)
x = torch.randn(8, 3, 32, 32).to(memory_format=torch.channels_last)
for _ in range(2):
    model(x).sum().backward()
"""


@pytest.mark.slow
def test_canary_onednn_still_fails_a_narrow_channels_last_backward_held_to_avx2():
    """Why train/trainer.py's narrow_convolutions exists; when this fails, the installed torch no
    longer has the bug: drop the guard once every torch pyproject.toml allows is past it. The fault
    is a memory corruption: it aborted 7 runs of 8 here, so up to 5 tries."""
    for _ in range(5):
        try:
            done = subprocess.run([sys.executable, "-c", CANARY], env={**os.environ, **AVX2_ONLY}, timeout=60)
        except subprocess.TimeoutExpired:
            return  # the bug's other face: the weight gradient spins forever
        if done.returncode != 0:
            return
    raise AssertionError(f"torch {torch.__version__} ran it 5 times: narrow_convolutions may be removable")


@pytest.mark.slow
def test_the_tests_width_trains_channels_last_on_avx2(tiny_cifar, tmp_path):
    result = pretrain(tiny_cifar, tmp_path, env=AVX2_ONLY)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    assert "channels-last is off" not in result.stdout
    (run_dir,) = (tmp_path / "mabt").iterdir()
    assert read_json(run_dir / ARGS)["performance"]["disable_channel_last"] is False


@pytest.mark.parametrize(
    "cores, processes, workers, expected",
    [
        (2, 1, 2, (2, 2)),
        (2, 1, 4, (2, 2)),  # more workers than cores: capped
        (2, 1, 0, (2, 0)),
        (16, 4, 8, (4, 4)),  # CPU DDP: a share each (torch's default gives each all 16)
        (2, 4, 2, (1, 1)),  # more processes than cores: one each
    ],
)
def test_plan_cpu_threads(cores, processes, workers, expected):
    assert plan_cpu_threads(cores, processes, workers) == expected


@pytest.mark.slow
def test_a_cpu_run_chooses_its_threads_and_caps_its_workers(tiny_cifar, tmp_path):
    workers = usable_cores() + 2
    result = pretrain(tiny_cifar, tmp_path, env={"OMP_NUM_THREADS": None}, **{"data.num_workers": workers})
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    threads, capped = plan_cpu_threads(usable_cores(), 1, workers)
    assert f"data.num_workers={workers} on {usable_cores()} CPU cores" in result.stdout
    (run_dir,) = (tmp_path / "mabt").iterdir()
    args = read_json(run_dir / ARGS)
    assert (args["performance"]["cpu_threads"], args["data"]["num_workers"]) == (threads, capped)


@pytest.mark.slow
@pytest.mark.parametrize(
    "extra, env, wait",
    [
        ({"data.num_workers": 1}, {"OMP_WAIT_POLICY": None}, "PASSIVE"),  # workers share the cores
        ({"data.num_workers": 1}, {"OMP_WAIT_POLICY": "ACTIVE"}, "ACTIVE"),  # the user's word
        ({"data.format": "memory"}, {"OMP_WAIT_POLICY": None}, "default"),  # no workers: spinning pays
    ],
)
def test_openmp_threads_sleep_where_loader_workers_share_the_cores(extra, env, wait, tiny_cifar, tmp_path):
    result = pretrain(tiny_cifar, tmp_path, env=env, fresh=True, **extra)  # set before torch is imported
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    (hardware,) = [line for line in result.stdout.splitlines() if line.strip().startswith("hardware")]
    assert f"(OpenMP wait {wait})" in hardware, hardware


@pytest.mark.slow
def test_omp_num_threads_and_the_key_win_over_the_rule(tiny_cifar, tmp_path):
    result = pretrain(tiny_cifar, tmp_path / "a", env={"OMP_NUM_THREADS": "1"}, **{"data.num_workers": 0})
    assert result.returncode == 0, result.stderr[-3000:]
    (run_dir,) = (tmp_path / "a" / "mabt").iterdir()
    assert read_json(run_dir / ARGS)["performance"]["cpu_threads"] == 1
    bad = pretrain(tiny_cifar, tmp_path / "b", **{"+performance.cpu_threads": 0})
    assert bad.returncode == 2 and "performance.cpu_threads=0: use auto or an integer >= 1" in bad.stderr


# ----------------------------------------------------------------------------- precision


@pytest.mark.parametrize(
    "capability, env, avx512_bf16, amx, native, why",
    [
        ("AVX512", {}, True, False, True, "natively (avx512_bf16)"),
        ("AVX512", {}, False, True, True, "natively (amx_bf16)"),
        ("AVX512", {}, False, False, False, "neither avx512_bf16 nor amx_bf16"),
        ("AVX2", {}, True, False, False, "run at AVX2"),  # ATEN_CPU_CAPABILITY=avx2 or an AVX2 CPU
        ("AVX512", {"DNNL_MAX_CPU_ISA": "AVX2"}, True, False, False, "DNNL_MAX_CPU_ISA=AVX2"),
        ("AVX512", {"DNNL_MAX_CPU_ISA": "avx512_core_amx"}, True, False, True, "natively"),
    ],
)
def test_bf16_is_native_only_where_torch_and_onednn_compute_it(
    capability, env, avx512_bf16, amx, native, why, monkeypatch
):
    import torch

    from mvssl_plugin.config.hardware import cpu_bf16_native, cpu_precision

    monkeypatch.delenv("DNNL_MAX_CPU_ISA", raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: capability)
    # raising=False: torch 2.4 and older have neither probe (the next test covers its fallback)
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: avx512_bf16, raising=False)
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: amx, raising=False)
    found, reason = cpu_bf16_native()
    assert found is native and why in reason, reason
    assert cpu_precision()[0] == ("bf16-mixed" if native else "32")


@pytest.mark.parametrize(
    "flags, native, why",
    [
        ({"avx512f", "avx512_bf16"}, True, "natively (avx512_bf16)"),
        ({"avx512f", "amx_tile", "amx_bf16"}, True, "natively (amx_bf16)"),
        ({"avx512f", "avx2"}, False, "neither avx512_bf16 nor amx_bf16"),
        (set(), False, "neither avx512_bf16 nor amx_bf16"),  # no /proc/cpuinfo
    ],
)
def test_where_torch_has_no_bf16_probes_the_kernels_cpu_flags_say(flags, native, why, monkeypatch):
    """torch 2.4 and older lack torch.cpu._is_avx512_bf16_supported and _is_amx_tile_supported: the
    flags the Linux kernel lists for the CPU decide instead."""
    import torch

    from mvssl_plugin.config import hardware

    monkeypatch.delenv("DNNL_MAX_CPU_ISA", raising=False)
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "AVX512")
    monkeypatch.delattr(torch.cpu, "_is_avx512_bf16_supported", raising=False)
    monkeypatch.delattr(torch.cpu, "_is_amx_tile_supported", raising=False)
    monkeypatch.setattr(hardware, "linux_cpu_flags", lambda: frozenset(flags))
    found, reason = hardware.cpu_bf16_native()
    assert found is native and why in reason, reason


def test_linux_cpu_flags_reads_the_flags_line_and_is_empty_without_the_file(tmp_path):
    from mvssl_plugin.config.hardware import linux_cpu_flags

    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nmodel name\t: X\nflags\t\t: fpu avx2 amx_bf16 avx512_bf16\n\n")
    assert linux_cpu_flags(str(cpuinfo)) == {"fpu", "avx2", "amx_bf16", "avx512_bf16"}
    assert linux_cpu_flags(str(tmp_path / "absent")) == frozenset()


def started_precision(result) -> str:
    (hardware,) = [line for line in result.stdout.splitlines() if line.strip().startswith("hardware")]
    return hardware


@pytest.mark.slow
@pytest.mark.parametrize("asked", ["auto", "16-mixed"])
def test_a_cpu_run_picks_bf16_where_native_and_fp32_on_avx2_and_says_why(asked, tiny_cifar, tmp_path):
    """``precision: auto`` (the CPU recipes) and fp16 (the GPU recipes, which a CPU cannot run)
    become bf16-mixed on a CPU with native bf16, 32 where oneDNN and torch are held to AVX2."""
    from mvssl_plugin.config.hardware import cpu_precision

    expected, why = cpu_precision()  # this process's CPU, under the suite's environment
    native = pretrain(tiny_cifar, tmp_path / "native", precision=asked)
    avx2 = pretrain(tiny_cifar, tmp_path / "avx2", env=AVX2_ONLY, precision=asked)
    for result, precision, reason in ((native, expected, why), (avx2, "32", "run at AVX2")):
        assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
        line = started_precision(result)
        assert f"precision {precision} (" in line and reason in line, line
    (run_dir,) = (tmp_path / "avx2" / "mabt").iterdir()
    args = read_json(run_dir / ARGS)
    assert args["precision"] == "32" and "AVX2" in args["performance"]["precision_reason"]


@pytest.mark.slow
def test_an_explicit_precision_wins_over_the_cpu_choice(tiny_cifar, tmp_path):
    result = pretrain(tiny_cifar, tmp_path, precision=32)
    assert result.returncode == 0, result.stderr[-3000:]
    line = started_precision(result)
    assert "precision 32;" in line, line  # no reason: nothing was chosen for the user
    (run_dir,) = (tmp_path / "mabt").iterdir()
    assert read_json(run_dir / ARGS)["precision"] in ("32", 32)


def test_the_cpu_recipes_ask_for_auto():
    from mvssl_plugin.cli.config_name import compose_recipe

    for recipe in ("mabt_cifar_cpu.yaml", "mavicreg_cifar_cpu.yaml"):
        assert compose_recipe(recipe, "pretrain").precision == "auto", recipe


def _optimizer_path(accelerator: str = "cpu", **kwargs):
    from omegaconf import OmegaConf

    from mvssl_plugin.config.hardware import choose_optimizer_path

    cfg = OmegaConf.create(
        {"accelerator": accelerator, "optimizer": {"name": kwargs.pop("name", "adam"), "kwargs": kwargs}}
    )
    choose_optimizer_path(cfg)
    return OmegaConf.to_container(cfg)


def test_adam_runs_fused_unless_the_user_chose_an_implementation():
    chosen = _optimizer_path(accelerator="gpu")
    assert chosen["optimizer"]["kwargs"] == {"fused": True} and "auto" in chosen["performance"]["optimizer_path"]
    on_cpu = _optimizer_path()  # fused where this torch has the CPU kernel (torch >= 2.4)
    assert on_cpu["optimizer"]["kwargs"] == ({"fused": True} if fused_on_cpu("adam") else {})
    given = _optimizer_path(foreach=False)
    assert given["optimizer"]["kwargs"] == {"foreach": False}
    assert given["performance"]["optimizer_path"] == "foreach=False (as given)"
    lars = _optimizer_path(name="lars", eta=0.02)
    assert lars == {"accelerator": "cpu", "optimizer": {"name": "lars", "kwargs": {"eta": 0.02}}}  # untouched


def test_where_torch_has_no_fused_adam_on_the_cpu_a_cpu_run_keeps_torchs_loop(monkeypatch, request):
    """torch < 2.4 has no fused Adam on the CPU and refuses ``fused=True`` there when solo-learn
    builds the optimizer: every CPU run with Adam failed under torch 2.2 and 2.3. The stand-in
    refuses it as those do; a GPU run stays fused, and AdamW (not stood in) gets this torch's answer."""

    class AdamBefore24(torch.optim.Adam):
        def __init__(self, params, *args, fused=None, **kwargs):
            super().__init__(params, *args, fused=fused, **kwargs)
            if fused and any(p.device.type == "cpu" for group in self.param_groups for p in group["params"]):
                raise RuntimeError("`fused=True` requires all the params to be ... of supported devices")

    monkeypatch.setattr(torch.optim, "Adam", AdamBefore24)
    fused_on_cpu.cache_clear()
    request.addfinalizer(fused_on_cpu.cache_clear)  # the stand-in's answer is not kept
    cpu = _optimizer_path()
    assert cpu["optimizer"]["kwargs"] == {}
    assert "this torch has no fused adam on the CPU" in cpu["performance"]["optimizer_path"]
    assert _optimizer_path(accelerator="gpu")["optimizer"]["kwargs"] == {"fused": True}
    adamw = _optimizer_path(name="adamw")["optimizer"]["kwargs"]
    assert adamw == ({"fused": True} if fused_on_cpu("adamw") else {})  # this torch's own answer


@pytest.mark.skipif(
    not fused_on_cpu("adam"),
    reason="this torch has no fused Adam on the CPU (torch < 2.4)",
)
def test_fused_adam_takes_the_same_steps_as_torchs_default_loop():
    """The fused kernel computes Adam's equation as the loop does: a few steps of a small network on a
    fixed batch end at the same weights (float32 rounding). No parameter has a gradient that is only
    rounding noise (a bias before BatchNorm): Adam would scale that noise up to a full step."""
    import torch

    def train(steps: int, **flags):
        torch.manual_seed(0)
        net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
        opt = torch.optim.Adam(net.parameters(), lr=2e-3, weight_decay=1e-6, **flags)
        x = torch.randn(32, 8, generator=torch.Generator().manual_seed(1))
        for _ in range(steps):
            opt.zero_grad()
            net(x).pow(2).mean().backward()
            opt.step()
        return torch.cat([p.detach().flatten() for p in net.parameters()])

    start, loop, fused = train(0), train(5, foreach=False), train(5, fused=True)
    assert (loop - start).abs().max() > 1e-3  # the steps moved the weights
    torch.testing.assert_close(fused, loop, rtol=1e-5, atol=1e-6)


@pytest.mark.slow
def test_the_start_block_names_the_optimizer_path_and_args_keep_it(tiny_cifar, tmp_path):
    result = pretrain(tiny_cifar, tmp_path)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    (line,) = [line for line in result.stdout.splitlines() if line.strip().startswith("optimizer")]
    assert "adam, lr" in line and "fused (auto" in line, line
    (run_dir,) = (tmp_path / "mabt").iterdir()
    assert read_json(run_dir / ARGS)["optimizer"]["kwargs"]["fused"] is True


@pytest.mark.parametrize("recipe", ["speedrun_mabt_cpu.yaml", "speedrun_mmcr_cpu.yaml"])
def test_the_path_a_cpu_recipe_picks_gives_the_plain_fp32_paths_loss_and_gradients(recipe, tiny_cifar, tmp_path):
    """The recipe's model as ``main_pretrain.py`` builds it, on the path this CPU picks (bf16
    autocast where native, channels-last unless the backbone is too narrow), against a copy of it
    in plain fp32 and contiguous memory, on one fixed batch: the same loss within bf16's rounding
    and gradients pointing the same way. Where the CPU picks fp32, channels-last must change
    nothing beyond fp32's rounding. On the AMX Xeon, bf16 moved the loss by 0.19% and left the
    backbone's gradient at cosine 0.92 to fp32's (random weights and inputs, where small
    gradients cancel); a wrong layout or dtype in the path gives a cosine near 0."""
    import copy

    import torch

    from mvssl_plugin.cli.config_name import compose_recipe
    from mvssl_plugin.train.pretrain import build_pretrain_model
    from mvssl_plugin.train.trainer import training_layout

    overrides = [f"data.train_path={tiny_cifar['train']}", f"data.val_path={tiny_cifar['test']}",
                 f"checkpoint.dir={tmp_path}", "auto_resume.enabled=false", "accelerator=cpu"]  # fmt: skip
    cfg, fast = build_pretrain_model(compose_recipe(recipe, "pretrain", overrides), notify=lambda _: None)
    plain = copy.deepcopy(fast)
    fast, _ = training_layout(cfg, fast)  # as fit lays it out
    channels_last = not cfg.performance.disable_channel_last
    bf16 = cfg.precision == "bf16-mixed"
    generator = torch.Generator().manual_seed(0)
    views = [torch.randn(32, 3, 32, 32, generator=generator) for _ in range(cfg.data.num_large_crops)]
    targets = torch.randint(0, 10, (32,), generator=generator)
    memory = torch.channels_last if channels_last else torch.contiguous_format
    plain_loss = plain.training_step([torch.arange(32), views, targets], 0)
    plain_loss.backward()
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        fast_views = [v.contiguous(memory_format=memory) for v in views]
        fast_loss = fast.training_step([torch.arange(32), fast_views, targets], 0)
    fast_loss.backward()
    rtol = 2e-2 if bf16 else 1e-4
    torch.testing.assert_close(fast_loss.float(), plain_loss, rtol=rtol, atol=0)
    gradients = [torch.cat([p.grad.float().flatten() for p in m.backbone.parameters()]) for m in (plain, fast)]
    cosine = torch.nn.functional.cosine_similarity(*gradients, dim=0)
    assert cosine > (0.8 if bf16 else 0.9999), (float(cosine), cfg.precision)
