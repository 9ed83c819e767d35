"""coworkenv for TRL: live coworkenv episodes for a ``trl.GRPOTrainer`` you build yourself.

    from coworkenv.trl import CoworkEnv

    with CoworkEnv("runs/coworkenv.db", style="compact") as env:
        trainer = GRPOTrainer(model=..., args=GRPOConfig(...), train_dataset=env.dataset,
                              rollout_func=env.rollout_func, reward_funcs=env.rewards())
        trainer.train()

Each rollout is a real episode in a sandbox, graded by the gate; the rewards are its verdict
(docs/trl.md). The implementation lives with the loop (``coworkenv.loop.CoworkEnv``), which owns
who plays which episode; this module is its name where TRL users look for it.
"""

from .loop import CoworkEnv

__all__ = ["CoworkEnv"]
