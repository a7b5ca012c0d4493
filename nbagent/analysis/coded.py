"""A column of few distinct values, kept as codes (see :mod:`nbagent.analysis.columns`)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Coded:
    """A column of few distinct values: ``codes`` (int64 array) index into ``values``.

    A plain form for TEXT, CATEGORY and COUNT columns read by :meth:`Table.coded`."""

    codes: Any
    values: list

    def __len__(self) -> int:
        return len(self.codes)

    def tolist(self) -> list:
        return list(map(self.values.__getitem__, self.codes.tolist()))

    def floats(self) -> Any:
        import numpy as np

        table = np.array([math.nan if v is None else v for v in self.values], dtype=np.float64)
        return table[self.codes] if len(self.values) else np.zeros(len(self.codes))
