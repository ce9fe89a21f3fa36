"""The Lightning flow of a run: checks in order, model and loaders, Trainer, checkpoints, start block."""
