"""Which of the papers' claims hold in a measured table: each a plain sentence, whether it
holds, and the numbers behind it, so a run's `<table>.md` says what it showed without anyone
reading the cells by hand.

    for c in check(doc): print("holds" if c["holds"] else "does not hold", c["claim"], c["detail"])

Each table module states its own claims (`Table.claims`, built from tables/compare.py). Claims
whose arms or tasks a table lacks (a user's `--task` data, a table run in part) are left out
rather than reported as failing.
"""

from __future__ import annotations

from bert_jax.ablations import tables


def check(doc: dict) -> list[dict]:
    """[{"claim", "holds", "detail"}] for the table document `doc` (report.write's)."""
    if doc["table"] not in tables.names():  # a document of no known table: nothing to check
        return []
    return [c for c in tables.get(doc["table"]).claims(doc) if c is not None]
