"""hta.analysis.rowmap: walking up the parent links."""

from __future__ import annotations

import numpy as np

from hta.analysis.rowmap import nearest_marked_ancestor


def test_nearest_marked_ancestor() -> None:
    # 0 <- 1 <- 2 <- 3 and 4 alone; 0 and 1 marked
    parent = np.array([-1, 0, 1, 2, -1])
    mark = np.array([True, True, False, False, False])
    rows = np.array([3, 2, 1, 0, 4, -1])
    # strict ancestors only: row 1's nearest marked is 0, row 0 has none
    assert nearest_marked_ancestor(parent, rows, mark).tolist() == [1, 1, 0, -1, -1, -1]
