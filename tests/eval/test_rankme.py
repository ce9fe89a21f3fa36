"""RankMe (eval/rankme.py): the effective rank counts the dimensions embeddings use."""

from __future__ import annotations

import pytest
import torch

from mvssl_plugin.eval.rankme import rankme


def test_rankme_counts_used_dimensions():
    torch.manual_seed(0)
    full = torch.randn(2048, 32)
    assert 28 < rankme(full) <= 32
    assert rankme(full * 100) == pytest.approx(rankme(full), rel=1e-6), "scale-free"
    collapsed = torch.randn(2048, 1) @ torch.randn(1, 32)
    assert rankme(collapsed) < 1.01
    half = torch.cat([torch.randn(2048, 16), torch.zeros(2048, 16)], dim=1)
    assert 14 < rankme(half) <= 16
    with pytest.raises(ValueError, match=r"\(N, d\)"):
        rankme(torch.randn(8))
