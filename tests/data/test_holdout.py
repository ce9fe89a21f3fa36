"""The validation split held out of the training images (data/holdout.py, ``data.holdout``)."""

from __future__ import annotations

from collections import Counter

import pytest
from helpers import checked_config, make_image_folder

from mvssl_plugin.data.holdout import holdout_positions
from mvssl_plugin.data.pretrain_set import holdout_samples, pretrain_samples
from mvssl_plugin.errors import ConfigError


def test_holdout_is_class_balanced_and_fixed():
    labels = [i % 3 for i in range(30)] + [3] * 5
    held = holdout_positions(labels, 10)
    assert held == holdout_positions(labels, 10) == sorted(set(held))
    # 10 over 4 classes: 3, 3, 2, 2 (the first classes take the remainder)
    assert Counter(labels[i] for i in held) == {0: 3, 1: 3, 2: 2, 3: 2}
    # a class's draw depends on its own members and share only: another class beside it (the same
    # share each, 3) changes none of the others'
    more = holdout_positions(labels + [4] * 5, 15)
    assert [i for i in more if i < len(labels)] == holdout_positions(labels, 12)
    with pytest.raises(ValueError, match="at most 4 per class"):
        holdout_positions(labels, 20)


def _files(tmp_path, **overrides):
    data = make_image_folder(tmp_path / "train", classes=3, per_class=10)
    cfg = checked_config("mabt_cifar.yaml", "cpu", **{"data.train_path": str(data), **overrides})
    return pretrain_samples(cfg), holdout_samples(cfg), cfg


def test_the_split_is_disjoint_from_training_and_the_same_for_every_run(tmp_path):
    (train, train_labels), (held, held_labels), _ = _files(tmp_path, **{"data.holdout": 6})
    assert len(held) == 6 and Counter(held_labels) == {0: 2, 1: 2, 2: 2}
    assert not set(train) & set(held) and len(train) == 24
    # another seed, method or fraction: the same held-out images, none of them trained on
    for overrides in ({"seed": 7, "method": "mavicreg"}, {"data.fraction": 0.5}):
        (other_train, _), (other_held, _), _ = _files(tmp_path, **{"data.holdout": 6, **overrides})
        assert other_held == held and not set(other_train) & set(held)
    (half, _), _, _ = _files(tmp_path, **{"data.holdout": 6, "data.fraction": 0.5})
    assert len(half) == 12
    # without a holdout every image trains, as before
    (everything, _), _, _ = _files(tmp_path)
    assert sorted(everything) == sorted(train + held)


def test_a_holdout_that_empties_a_class_is_refused_naming_the_key(tmp_path):
    (train, _), _, cfg = _files(tmp_path)
    cfg.data.holdout = 30
    with pytest.raises(ConfigError, match=r"data.holdout=30: .*at most 9 per class.*lower it"):
        pretrain_samples(cfg)
