"""How many entities each semantic stage keeps: the embedding's candidates, the reranker's picks.

The contract with the team's system (contract.py) asks for the same depths; they live here, apart
from its models, so a run that asks no system never builds them.
"""

from __future__ import annotations

CANDIDATE_K = 15
SELECTION_K = 6
