"""Evaluation of pretrained runs: effective rank (pure torch), cached-feature linear probe,
offline kNN, training-time signals (Lightning callbacks) and the comparison of runs."""
