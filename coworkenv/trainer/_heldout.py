"""The held-out evaluation's names: its splits, the status of its tasks, its default seed."""

SPLITS = ("new_seeds", "unseen_combinations")
HELDOUT = "heldout"  # task status of evaluation tasks: calibrated, never collected or exported
DEFAULT_EVAL_SEED = 10_000
