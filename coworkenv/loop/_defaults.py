"""The loop's defaults and names, importable without the agent stack (the CLI reads them).

Held-out tasks have the task status ``heldout``: calibrated, never collected or exported.
"""

SPLITS = ("new_seeds", "unseen_combinations")
DEFAULT_EVAL_SEED = 10_000

DEMO_TASKS = 24
# demo --full (benchmarks/loop.md records what they reach on a 2-core machine)
FULL_CAPABILITIES = ("lookup", "single_write", "multi_step", "multi_turn")
FULL_EVAL_TASKS = 48  # held-out tasks of new seeds: 12 per capability
FULL_UNSEEN_SHARE = 0.2  # of each capability's combinations, kept out of training for the unseen-combinations split
FULL_TASKS = 3000  # distinct tasks (~2,200 training rows; twice the rows changed nothing at 2,400 steps: benchmarks/loop.md)
# each capability's training tasks per workspace (None: a round of its templates, ~12; 1 changed nothing
# measurable for the tiny model, benchmarks/loop.md)
FULL_PER_WORKSPACE: int | None = None
FULL_VALUE_SWAPS = 0  # value-swapped variants of each SFT row; one did not make the tiny model copy (benchmarks/loop.md)
FULL_STEPS = 2400  # SFT steps (what they cost on a 2-core CPU: benchmarks/loop.md)
FULL_BASE = "circuit"  # init-tiny --copy-circuit; "scratch": init-tiny; "pretrained": a committed PocketWorker base
FULL_TOOL_LINES = "signatures"  # how an init-tiny base's template lists the tools: a signature a line, not JSON
FULL_SPACES = "separate"  # an init-tiny base's tokenizer: the space before a word a token of its own
FULL_POINTER_LOSS = 1.0  # SFT from the circuit base: the weight of the loss on where its pointer heads look
FULL_LR = 2e-3  # SFT learning rate from the pretrained base (from scratch: 1e-2)
FULL_REPLAY = 0.5  # pretraining exercises mixed into SFT, per task row (the base keeps copying while it learns tools)
