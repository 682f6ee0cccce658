"""The shard schema type: which features a `tf.train.Example` of a shard holds, in write order.
The schemas themselves are declared by the objectives (`Objective.shard_schema`)."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Feature:
    name: str
    length: int
    dtype: str  # "int64" | "float32"


Schema = tuple[Feature, ...]

