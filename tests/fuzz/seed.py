"""The fuzz tests' seed for this session: ``FUSEC_FUZZ_SEED`` when set, else a fresh random one, so that each run
(CI's too) draws other graphs; pytest's header prints it (``tests/conftest.py``), and every fuzz failure names it,
so ``FUSEC_FUZZ_SEED=<seed> pytest tests/fuzz`` draws the same graphs again."""

from __future__ import annotations

import os
import random

SEED = int(os.environ.get("FUSEC_FUZZ_SEED") or random.SystemRandom().randrange(1, 10**6))
