"""Evaluation of pretrained runs: effective rank (pure torch, and as a training-time
Lightning callback), cached-feature linear probe, offline kNN (the grid and the run of it)
and the comparison of runs."""
