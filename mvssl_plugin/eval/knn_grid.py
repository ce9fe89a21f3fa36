"""Offline kNN over a grid of k, temperature and distance, with solo-learn's
``WeightedKNNClassifier`` (its number of classes taken from both sets), on features
computed once."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Dict, List

import torch
import torch.nn.functional as F

FEATURE_TYPES = ("backbone", "projector")
DISTANCES = ("cosine", "euclidean")


def all_classes_knn(k: int, temperature: float, distance: str):
    """solo-learn's ``WeightedKNNClassifier`` with one change: the number of classes is that
    of both sets (the largest label + 1), not the distinct labels of the test set, so a test
    set of some of the training classes (validation labels matched by name) does not index
    past its vote table (solo-learn's ``compute`` fails there with an IndexError). With every
    class in the test set the two agree: the same loop, the same numbers."""
    # local: solo-learn (all of it: seconds) loads for the kNN itself; cli.knn imports this module for its
    # flags' choices, before main() silences solo-learn's harmless warnings
    from solo.utils.knn import WeightedKNNClassifier

    class AllClassesKNN(WeightedKNNClassifier):
        @torch.no_grad()
        def compute(self):
            if not self.train_features or not self.test_features:
                return -1, -1
            train_x, train_y = torch.cat(self.train_features), torch.cat(self.train_targets)
            test_x, test_y = torch.cat(self.test_features), torch.cat(self.test_targets)
            if self.distance_fx == "cosine":
                train_x, test_x = F.normalize(train_x), F.normalize(test_x)
            num_classes = int(max(train_y.max(), test_y.max())) + 1
            chunk = min(max(1, self.max_distance_matrix_size // train_y.size(0)), test_y.size(0))
            k = min(self.k, train_y.size(0))
            top1 = top5 = 0.0
            for first in range(0, test_y.size(0), chunk):
                features, targets = test_x[first : first + chunk], test_y[first : first + chunk]
                if self.distance_fx == "cosine":
                    similarities = features @ train_x.t()
                else:
                    similarities = 1 / (torch.cdist(features, train_x) + self.epsilon)
                similarities, indices = similarities.topk(k, largest=True, sorted=True)
                neighbours = torch.gather(train_y.view(1, -1).expand(len(targets), -1), 1, indices)
                votes = torch.zeros(len(targets) * k, num_classes, device=train_x.device)
                votes.scatter_(1, neighbours.view(-1, 1), 1)
                if self.distance_fx == "cosine":
                    similarities = similarities.clone().div_(self.T).exp_()
                probs = (votes.view(len(targets), -1, num_classes) * similarities.view(len(targets), -1, 1)).sum(1)
                correct = probs.sort(1, True)[1].eq(targets.view(-1, 1))
                top1 += correct.narrow(1, 0, 1).sum().item()
                top5 += correct.narrow(1, 0, min(5, k, correct.size(-1))).sum().item()
            self.reset()
            return top1 * 100.0 / test_y.size(0), top5 * 100.0 / test_y.size(0)

    return AllClassesKNN(k=k, T=temperature, distance_fx=distance)


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
    rows = []
    for feature in feature_types:
        if feature not in train:
            report(f"no {feature} features (the method has no projector): skipping")
            continue
        for k in ks:
            for distance in distances:
                for temperature in temperatures if distance == "cosine" else [None]:
                    classifier = all_classes_knn(k, temperature or 0.07, distance)
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
