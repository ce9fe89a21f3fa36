"""The peak-RAM estimate (peak_ram_estimate.py): how it scales with a run's shape. Its calibration
against measured peaks is a benchmark (benchmarks/bench_peak_ram.py): a child's peak RSS
depends on the environment (the same 2-step run peaked at 1.18 GiB alone and at 1.86 GiB
late in the full suite), so it is not asserted here."""

from __future__ import annotations

from dataclasses import replace

from mvssl_plugin.peak_ram_estimate import RunShape, estimate_peak

SHAPE = RunShape(backbone="narrow_resnet18", views=((32, 4),), batch_size=64, proj_hidden_dim=256, proj_output_dim=256)


def activations(shape: RunShape) -> float:
    return estimate_peak(shape).parts["activations"]


def test_activations_grow_with_views_times_batch_and_only_with_that():
    base = activations(SHAPE)
    assert activations(replace(SHAPE, batch_size=128)) == 2 * base
    assert activations(replace(SHAPE, views=((32, 8),))) == 2 * base
    assert activations(replace(SHAPE, views=((32, 2),), batch_size=128)) == base
    assert activations(replace(SHAPE, width=SHAPE.width // 2)) == base / 2  # per unit of the narrow ResNet's width


def test_half_precision_halves_activations_on_a_gpu_only():
    """Calibrated: fp32 on the CPU. bf16 on a CPU is counted as fp32 (its measured peak ranged
    from 0.87x to 1.58x the fp32 one); fp16 / bf16 on a GPU keep half the activations."""
    gpu = replace(SHAPE, device="cuda")
    assert activations(replace(gpu, precision="16-mixed")) == activations(gpu) / 2
    assert activations(replace(SHAPE, precision="bf16-mixed")) == activations(SHAPE)


def test_the_total_is_the_sum_of_its_parts():
    estimate = estimate_peak(SHAPE)
    assert estimate.total == sum(estimate.parts.values()) and estimate.parts["activations"] > 0
