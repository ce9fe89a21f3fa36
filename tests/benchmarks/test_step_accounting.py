"""The step accounting's reading of oneDNN's verbose lines (benchmarks/step_accounting.py)."""

from __future__ import annotations

import pytest
import step_accounting

LINE = (
    "onednn_verbose,v1,primitive,exec,cpu,convolution,brg_conv_fwd:avx512_core_bf16,forward_training,"
    "src:bf16::blocked:acdb::f0 wei:bf16:a:blocked:AcdB16b32a2b::f0 dst:bf16::blocked:acdb::f0,"
    "attr-scratchpad:user,alg:convolution_direct,mb256_ic16oc32_ih32oh16kh3sh2dh0ph1_iw32ow16kw3sw2dw0pw1,0.5"
)


def test_a_verbose_line_gives_its_pass_kernel_shape_and_milliseconds():
    match = step_accounting.VERBOSE_CONV.search(LINE)
    impl, kind, shape, ms = match.groups()
    assert (impl, kind, ms) == ("brg_conv_fwd:avx512_core_bf16", "forward_training", "0.5")
    label, flops = step_accounting.conv_flops(shape)
    assert label == "16->32 ch, 3x3/2, 16 px out"
    assert flops == 2 * 256 * 16 * 32 * 16 * 16 * 3 * 3


def test_layers_sum_their_calls_per_pass():
    shape = "mb128_ic3oc16_ih32oh32kh3sh1dh0ph1_iw32ow32kw3sw1dw0pw1"
    calls = {("forward_training", "a", shape): [1.0, 2.0], ("backward_data", "b", shape): [4.0]}
    ((label, kinds),) = step_accounting.by_layer(calls).items()
    one = 2 * 128 * 3 * 16 * 32 * 32 * 9
    assert label == "3->16 ch, 3x3/1, 32 px out"
    assert kinds["forward_training"] == [3.0, 2 * one] and kinds["backward_data"] == [4.0, one]


def test_the_peak_is_avx2s_when_onednn_is_held_to_avx2(monkeypatch):
    facts = {"flags": {"avx2", "avx512f", "avx512_bf16"}, "family": 26, "vendor": "AuthenticAMD", "mhz": 1000.0}
    fp32, bf16, _ = step_accounting.peak({**facts, "cores": 2})
    assert (fp32, bf16) == (2 * 1e9 * 64, 2 * 1e9 * 128)
    if "avx512f" not in step_accounting.cpu_facts()["flags"]:
        return  # this CPU has no AVX-512 to hold back; the arithmetic above is the test
    monkeypatch.setenv("DNNL_MAX_CPU_ISA", "AVX2")
    held = step_accounting.cpu_facts()
    assert held["held"] == "AVX2" and not any(f.startswith(("avx512", "amx")) for f in held["flags"])
    fp32, bf16, _ = step_accounting.peak(held)
    assert fp32 == bf16 == held["cores"] * held["mhz"] * 1e6 * 32


def test_the_bf16_peak_is_amxs_where_the_cpu_has_it():
    facts = {"flags": {"avx2", "avx512f", "avx512_bf16", "amx_tile", "amx_bf16"}, "family": 6, "vendor": "GenuineIntel"}
    fp32, bf16, how = step_accounting.peak({**facts, "mhz": 1000.0, "cores": 2})
    assert (fp32, bf16) == (2 * 1e9 * 64, 2 * 1e9 * 1024)
    assert "bf16 1024 FLOP/cycle" in how


@pytest.mark.slow
def test_the_operator_table_ranks_the_steps_aten_operators_by_their_own_time():
    ops = step_accounting.operators(step_accounting.recipe_step(), steps=1, top=4)
    names = [name for name, _ in ops]
    assert len(ops) == 4 and all(n.startswith("aten::") for n in names)
    assert [ms for _, ms in ops] == sorted((ms for _, ms in ops), reverse=True) and ops[-1][1] > 0
    assert "aten::convolution_backward" in names  # 66% of the step's FLOPs: always among the costliest


def test_the_profiles_operators_fall_in_what_they_do_compiled_regions_apart():
    names = {
        "aten::mkldnn_convolution": "convolutions",
        "aten::convolution_backward": "convolutions",
        "aten::native_batch_norm_backward": "BatchNorm",
        "aten::threshold_backward": "ReLU",
        "aten::addmm": "matrix products (projector)",  # not an add
        "aten::_fused_adam_": "Adam",
        "Torch-Compiled Region: 0/0": "compiled code (fused kernels, guards)",
        "aten::add_": "adds, copies and other elementwise",
        "aten::empty_strided": "other",
    }
    assert {name: step_accounting.category(name) for name in names} == names


def test_a_wider_first_stage_adds_the_flops_its_convolutions_count():
    """``--set`` reaches the model: the step's FLOPs grow by the wider stem and first stage, counted by
    hand (forward, data and weight gradients; the stem has no data gradient: the views need none)."""
    base = step_accounting.recipe_step([], "speedrun_cpu.yaml")
    wide = step_accounting.recipe_step(["++backbone.kwargs.first_stage_width=32"], "speedrun_cpu.yaml")
    images = len(base.views) * base.views[0].shape[0]
    stem = 3 * 9 * (32 - 16) * 32 * 32  # multiply-adds an image, at 32 px
    stage = 4 * 9 * (32 * 32 - 16 * 16) * 32 * 32 + 9 * (32 - 16) * 32 * 16 * 16 + (32 - 16) * 32 * 16 * 16
    expected = 2 * images * (2 * stem + 3 * stage)
    grew = sum(step_accounting.flops_by_op(wide).values()) - sum(step_accounting.flops_by_op(base).values())
    assert grew == expected
