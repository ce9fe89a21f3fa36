"""``performance.compile``, as a user turns it on (a recipe and an override, through ``pretrain``):
the training step runs the compiled forwards of any method, ours and solo-learn's built-ins alike,
and every evaluation (the per-epoch kNN, solo-learn's validation loop) the eager forward of the same
weights (methods/compiled.py)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from mvssl_plugin.cli.config_name import compose_recipe
from mvssl_plugin.files import read_csv
from mvssl_plugin.methods.compiled import compile_forwards
from mvssl_plugin.runs import EPOCH_KNN
from mvssl_plugin.synthetic import tiny_overrides
from mvssl_plugin.train.pretrain import pretrain

pytestmark = pytest.mark.usefixtures("one_thread")


def _stand_in(calls: list):
    """A ``torch.compile`` that compiles nothing and records, per call of what it returned, the
    name of the module's class and whether it was training: which passes went through it."""

    def compile(forward):
        def compiled(*args, **kwargs):
            calls.append((type(forward.__self__).__name__, forward.__self__.training))
            return forward(*args, **kwargs)

        return compiled

    return compile


@pytest.mark.parametrize(
    ("recipe", "method"), [("mavicreg_cifar.yaml", "mavicreg"), ("mavicreg_cifar_2views_d8192.yaml", "vicreg")]
)
def test_training_runs_the_compiled_forwards_and_the_epoch_knn_the_eager_ones(
    recipe, method, tiny_cifar, tmp_path, monkeypatch, capsys
):
    calls: list = []
    monkeypatch.setattr(torch, "compile", _stand_in(calls))
    extra = {"method": method, "++performance.compile": "true", "epoch_knn.enabled": "true", "data.holdout": 6}
    pretrain(compose_recipe(recipe, "pretrain", tiny_overrides(tiny_cifar, tmp_path, **extra)))
    (folder,) = (tmp_path / method).iterdir()
    assert [int(r["epoch"]) for r in read_csv(folder / EPOCH_KNN)] == [0]  # the kNN ran...
    # ...and neither it nor solo-learn's validation loop (evaluation mode) went through a compiled forward
    assert {training for _, training in calls} == {True}
    assert {name for name, _ in calls} == {"NarrowResNet18", "Sequential"}  # the backbone's and projector's
    if method == "vicreg":
        assert "vicreg's backbone and projector compiled (performance.compile=true)" in capsys.readouterr().out


def test_training_runs_the_compiled_forward_and_evaluation_the_class_forward_on_the_same_weights(monkeypatch):
    calls: list = []
    monkeypatch.setattr(torch, "compile", _stand_in(calls))
    model = nn.Module()
    model.backbone, model.projector = nn.Linear(4, 3), nn.Linear(3, 2)
    keys = list(model.state_dict())
    x = torch.randn(5, 4)
    expected = model.projector(model.backbone(x))
    assert compile_forwards(model) == ["backbone", "projector"]
    assert compile_forwards(model) == []  # compiled once, not a compile of a compiled forward
    assert list(model.state_dict()) == keys  # checkpoints load into uncompiled models
    model.eval()
    torch.testing.assert_close(model.projector(model.backbone(x)), expected)
    assert calls == []  # evaluation: the class's own forward
    model.train()
    torch.testing.assert_close(model.projector(model.backbone(x)), expected)
    assert calls == [("Linear", True), ("Linear", True)]  # training: through the compiled forwards
