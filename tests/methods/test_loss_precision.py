"""``performance.loss_fp32``: the precision of any method's loss under mixed precision, ours and
solo-learn's built-ins alike, as a user sets it (a recipe and an override, through ``pretrain``)."""

from __future__ import annotations

import pytest
import solo.methods.vicreg as solo_vicreg
import torch
from helpers import cpu_autocast_enabled
from solo.losses.vicreg import vicreg_loss_func

from mvssl_plugin.cli.config_name import compose_recipe
from mvssl_plugin.errors import ConfigError
from mvssl_plugin.methods.loss_precision import compute_loss_in_float32, in_float32
from mvssl_plugin.methods.mavicreg import MultiAugVICReg
from mvssl_plugin.synthetic import tiny_overrides
from mvssl_plugin.train.pretrain import pretrain


def test_in_float32_leaves_autocast_and_casts_half_inputs():
    seen = {}

    def loss(a, b, weight=1.0):
        seen.update(autocast=cpu_autocast_enabled(), dtypes=(a.dtype, b.dtype))
        return (a @ b.T).sum() * weight

    a, b = torch.randn(8, 4).bfloat16(), torch.randn(8, 4)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        value = in_float32(loss)(a, b=b, weight=2.0)
    assert seen == {"autocast": False, "dtypes": (torch.float32, torch.float32)}
    assert value.dtype == torch.float32


def test_the_tests_read_the_cpus_autocast_on_a_torch_before_24(monkeypatch):
    """torch < 2.4's ``is_autocast_enabled`` takes no device and answers for CUDA (a TypeError
    with "cpu": the tests that read the CPU's autocast failed under torch 2.2.2); the stand-in has
    its signature."""

    def is_autocast_enabled() -> bool:
        return False

    def read() -> bool:  # the stand-in only for the read: torch.autocast itself calls the new signature
        with monkeypatch.context() as patched:
            patched.setattr(torch, "is_autocast_enabled", is_autocast_enabled)
            return cpu_autocast_enabled()

    with torch.autocast("cpu", dtype=torch.bfloat16):
        inside = read()
    assert inside and not read()


def test_solo_learns_vicreg_loss_differs_in_bf16_and_matches_float32_when_wrapped():
    """Why the key exists: the same views give another loss inside bf16 autocast."""
    torch.manual_seed(0)
    z1, z2 = torch.randn(64, 128), torch.randn(64, 128)
    exact = vicreg_loss_func(z1, z2)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        blurred = vicreg_loss_func(z1, z2)
        wrapped = in_float32(vicreg_loss_func)(z1, z2)
    assert blurred.item() != exact.item()
    assert wrapped.item() == exact.item()


def test_a_method_without_a_solo_loss_function_is_refused():
    with pytest.raises(ConfigError, match="performance.loss_fp32=true: .*leave performance.loss_fp32 unset"):
        compute_loss_in_float32(torch.nn.Linear(2, 2))


def _spy(monkeypatch, owner, name, seen: list):
    shipped = getattr(owner, name)

    def spy(*args, **kwargs):
        views = [v for a in args for v in (a if isinstance(a, (list, tuple)) else [a]) if isinstance(v, torch.Tensor)]
        seen.append((cpu_autocast_enabled(), views[-1].dtype))
        return shipped(*args, **kwargs)

    monkeypatch.setattr(owner, name, spy)


def _run(tiny_cifar, tmp_path, recipe: str, **extra) -> None:
    overrides = tiny_overrides(tiny_cifar, tmp_path, precision="bf16-mixed", **extra)
    pretrain(compose_recipe(recipe, "pretrain", overrides))


@pytest.mark.parametrize("key", [None, True])
def test_solo_learns_vicreg_loss_runs_in_float32_only_when_asked(key, tiny_cifar, tmp_path, monkeypatch, capsys):
    seen: list = []
    _spy(monkeypatch, solo_vicreg, "vicreg_loss_func", seen)
    extra = {} if key is None else {"+performance.loss_fp32": "true"}
    _run(tiny_cifar, tmp_path, "mavicreg_cifar_2views_d8192.yaml", method="vicreg", **extra)
    assert seen, "solo-learn's VICReg never called its loss"
    if key:
        assert set(seen) == {(False, torch.float32)}
        assert "vicreg's loss in float32 (vicreg_loss_func" in capsys.readouterr().out
    else:  # as solo-learn ships it: inside bf16 autocast
        assert {autocast for autocast, _ in seen} == {True}
    assert solo_vicreg.vicreg_loss_func.__name__ == "spy"  # the module's name is restored after each step


@pytest.mark.parametrize("key", [None, False])
def test_our_loss_runs_in_float32_unless_asked_not_to(key, tiny_cifar, tmp_path, monkeypatch):
    seen: list = []
    _spy(monkeypatch, MultiAugVICReg, "multiview_loss", seen)
    extra = {} if key is None else {"+performance.loss_fp32": "false"}
    _run(tiny_cifar, tmp_path, "mavicreg_cifar.yaml", **extra)
    assert seen
    assert {autocast for autocast, _ in seen} == ({False} if key is None else {True})
    if key is None:
        assert {dtype for _, dtype in seen} == {torch.float32}


def test_a_non_boolean_value_is_refused_early(tiny_cifar, tmp_path):
    with pytest.raises(ConfigError, match=r"performance.loss_fp32='yes': use true or false"):
        _run(tiny_cifar, tmp_path, "mavicreg_cifar.yaml", **{"+performance.loss_fp32": "yes"})
    assert not any(tmp_path.rglob("*.ckpt"))
