"""The claims harness: the grid of runs that decide the paper's claims on CIFAR-10, and the
machinery that runs it in resumable pieces (``benchmarks/cpu_claims.py`` is its command line).

One module per concern, imports pointing down this list:

- :mod:`claims.grid`: what a run is: the scale (width, accelerator, results folder), the grid's
  points, their order, and each run's recipe and Hydra overrides;
- :mod:`claims.clocks`: what a run's time is: pauses, the harness's active clock, ``--until``,
  the machine and commit a row names, step times measured side by side, estimates of a run's
  minutes;
- :mod:`claims.verdicts`: what the CSV rows say, setting by setting: the verdicts (rows in,
  words out);
- :mod:`claims.plots`: the report's plots;
- :mod:`claims.report`: summary.md and the README's claims table from the CSVs;
- :mod:`claims.runner`: running the grid: the child process, resume, going on from a shorter
  run, carrying a stopped run to another machine (the newest
  complete checkpoint, copied into ``carry/``), the budget;
- :mod:`claims.cli`: the command line's run options: the budget, ``--until``, pauses,
  the data, the child's option, and running a plan within the budget;
- :mod:`claims.epoch_eval`: the child's per-epoch kNN and clocks, a Lightning callback (only the
  child imports it, and with it torch and Lightning).
"""
