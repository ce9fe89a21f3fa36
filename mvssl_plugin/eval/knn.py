"""Offline kNN over a grid of k, temperature and distance, with solo-learn's
``WeightedKNNClassifier``, on features computed once."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Dict, List

import torch

FEATURE_TYPES = ("backbone", "projector")
DISTANCES = ("cosine", "euclidean")


def knn_grid(
    train: Dict[str, torch.Tensor],
    val: Dict[str, torch.Tensor],
    feature_types: Sequence[str],
    ks: Sequence[int],
    distances: Sequence[str],
    temperatures: Sequence[float],
    report=print,
) -> List[dict]:
    """One row per (feature, k, distance, temperature): top-1 / top-5 accuracy (%).

    ``train`` / ``val``: :func:`~mvssl_plugin.eval.features.extract_features` outputs.
    Temperature only weighs cosine neighbours; euclidean rows leave it empty."""
    from solo.utils.knn import WeightedKNNClassifier

    rows = []
    for feature in feature_types:
        if feature not in train:
            report(f"no {feature} features (the method has no projector): skipping")
            continue
        for k in ks:
            for distance in distances:
                for temperature in temperatures if distance == "cosine" else [None]:
                    classifier = WeightedKNNClassifier(k=k, T=temperature or 0.07, distance_fx=distance)
                    classifier(
                        train_features=train[feature],
                        train_targets=train["labels"],
                        test_features=val[feature],
                        test_targets=val["labels"],
                    )
                    acc1, acc5 = (float(a) for a in classifier.compute())
                    rows.append(
                        {
                            "feature": feature,
                            "k": k,
                            "distance": distance,
                            "temperature": temperature if temperature is not None else "",
                            "acc1": round(acc1, 3),
                            "acc5": round(acc5, 3),
                        }
                    )
                    report(
                        f"kNN {feature:9s} k={k:<4d} {distance:9s} T={temperature if temperature else '-':<5} "
                        f"acc@1 {acc1:6.2f}  acc@5 {acc5:6.2f}"
                    )
    return rows
