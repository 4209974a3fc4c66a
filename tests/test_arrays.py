"""``hta.model.arrays``: ``np.unique``'s and ``np.union1d``'s answers by a sort, and
none of numpy's hash-set paths left in the package (a bare ``np.unique``, ``np.union1d``,
``np.intersect1d``, ``np.setdiff1d`` without ``assume_unique``: seconds on a million node
ids)."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

from hta.model.arrays import distinct, union

PACKAGE = Path(__file__).resolve().parent.parent / "hta"

_CASES = {
    "empty": np.zeros(0, dtype=np.int64),
    "one": np.asarray([7], dtype=np.int64),
    "repeats, unsorted": np.asarray([5, -1, 5, 3, -1, 0, 3], dtype=np.int64),
    "int32": np.asarray([3, 1, 2, 1], dtype=np.int32),
    "uint8": np.asarray([200, 3, 200], dtype=np.uint8),
    "booleans": np.asarray([True, False, True]),
    "floats with NaNs": np.asarray([np.nan, 1.5, np.nan, -2.0, 1.5]),
    "strings": np.asarray(["b", "a", "b", "c"]),
    "objects": np.asarray(["x", "y", "x"], dtype=object),
    "two dimensions": np.asarray([[3, 1], [1, 2]], dtype=np.int64),
}


@pytest.mark.parametrize("name", sorted(_CASES))
def test_distinct_gives_what_np_unique_gives(name: str) -> None:
    values = _CASES[name]
    got = distinct(values)
    want = np.unique(values)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


def test_distinct_on_many_random_ids_and_leaves_its_input_alone() -> None:
    rng = np.random.default_rng(3)
    for high in (3, 1_000, 10**12):
        values = rng.integers(-5, high, 50_000)
        before = values.copy()
        np.testing.assert_array_equal(distinct(values), np.unique(values))
        np.testing.assert_array_equal(values, before)
    assert distinct(np.asarray([4])).base is None  # a copy, not a view of the input


def test_union_gives_what_np_union1d_gives() -> None:
    pairs = [(np.asarray([5, 1, 5], dtype=np.int64), np.asarray([2, 1], dtype=np.int64)),
             (np.asarray([3, 1], dtype=np.int64), np.asarray([])),  # int and float: float
             (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)),
             (np.asarray([[4, 2]], dtype=np.int32), np.asarray([2, 9], dtype=np.int64))]
    for a, b in pairs:
        got, want = union(a, b), np.union1d(a, b)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(union([3, 1], [2], [1, 7]), [1, 2, 3, 7])


_HASHED = {"unique_values", "union1d", "intersect1d", "setxor1d"}


def _bare_unique_calls(path: Path) -> list[int]:
    """Lines of the calls that take numpy's hash path: ``np.unique(...)`` without
    ``return_*`` or ``axis``, ``np.setdiff1d`` without ``assume_unique``, and the set
    functions built on a bare unique."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "np"):
            continue
        keywords = {k.arg for k in node.keywords}
        name = node.func.attr
        if (name in _HASHED
                or (name == "setdiff1d" and "assume_unique" not in keywords)
                or (name == "unique" and not keywords & {"return_index", "return_inverse",
                                                          "return_counts", "axis"})):
            lines.append(node.lineno)
    return lines


def test_the_package_has_no_bare_np_unique() -> None:
    found = {str(p.relative_to(PACKAGE.parent)): lines for p in sorted(PACKAGE.rglob("*.py"))
             if (lines := _bare_unique_calls(p))}
    assert not found, f"use hta.model.arrays.distinct or union instead: {found}"


def test_the_scan_sees_a_bare_np_unique(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text("import numpy as np\n"
                      "a = np.unique(x)\n"
                      "b = np.unique(x, return_inverse=True)\n"
                      "c = np.unique_values(x)\n"
                      "d = np.union1d(x, y)\n"
                      "e = np.setdiff1d(x, y, assume_unique=True)\n"
                      "f = np.setdiff1d(x, y)\n")
    assert _bare_unique_calls(sample) == [2, 4, 5, 7]


def test_last_row_of_answers_what_a_dict_of_the_rows_answers() -> None:
    from hta.model.arrays import last_row_of

    rng = np.random.default_rng(3)
    keys = (rng.integers(0, 4, 400), rng.integers(0, 30, 400), rng.integers(0, 3, 400))
    queries = (rng.integers(0, 5, 300), rng.integers(0, 30, 300), rng.integers(0, 3, 300))
    table: dict[tuple[int, ...], int] = {}
    for row, key in enumerate(zip(*(k.tolist() for k in keys), strict=True)):
        table[key] = row                                   # repeated keys: the last row
    expected = [table.get(q, -1) for q in zip(*(q.tolist() for q in queries), strict=True)]
    got = last_row_of(keys, queries)
    assert got.tolist() == expected and (got == -1).any() and (got >= 0).any()
    assert last_row_of((np.zeros(0, dtype=np.int64),), (np.arange(3),)).tolist() == [-1] * 3
    assert last_row_of((np.arange(3),), (np.zeros(0, dtype=np.int64),)).size == 0


@pytest.mark.parametrize("distinct_values", [3, 50, 10_000])
def test_lexsort_gives_what_np_lexsort_gives(distinct_values: int) -> None:
    from hta.model.arrays import lexsort

    rng = np.random.default_rng(distinct_values)
    n = 5_000
    keys = (rng.integers(0, 2, n).astype(bool), rng.integers(-3, 3, n),
            rng.integers(0, 4, n).astype(np.int8), rng.integers(0, distinct_values, n))
    assert lexsort(keys).tolist() == np.lexsort(keys).tolist()      # full ties: stable
    assert lexsort(keys[-1:]).tolist() == np.lexsort(keys[-1:]).tolist()
    assert lexsort((np.arange(1), np.zeros(1))).tolist() == [0]
    assert lexsort((np.zeros(0), np.zeros(0))).size == 0


@pytest.mark.parametrize("case", ["narrow range, many ties", "negative and int32",
                                  "wide range, distinct", "wide range, ties", "small",
                                  "floats"])
def test_stable_argsort_gives_numpys_stable_order(case: str,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Every path of ``stable_argsort`` (packed keys, the unstable sort of distinct keys,
    NumPy's stable sort) gives ``np.argsort(kind="stable")``'s order, ties in position
    order."""
    from hta.model.arrays import PACKED_SORT_MIN, sorted_with_order, stable_argsort

    rng = np.random.default_rng(len(case))
    n = 2 * PACKED_SORT_MIN + 3
    keys = {
        "narrow range, many ties": rng.integers(0, 1_000, n),
        "negative and int32": rng.integers(-50_000, 50_000, n).astype(np.int32),
        # a range past the positions' room: the keys cannot be packed with them
        "wide range, distinct": rng.permutation(n).astype(np.int64) * (1 << 44) - (1 << 62),
        "wide range, ties": np.repeat(rng.integers(-(1 << 62), 1 << 62, n // 3 + 1), 3)[:n],
        "small": rng.integers(0, 5, 100),
        "floats": rng.integers(0, 100, n).astype(np.float64),
    }[case]
    got = stable_argsort(keys)
    assert got.dtype == np.int64 or case in ("small", "floats")
    assert got.tolist() == np.argsort(keys, kind="stable").tolist()
    order, ranked = sorted_with_order(keys)  # the keys in that order come with it
    assert order.tolist() == got.tolist()
    assert ranked.dtype == keys.dtype and ranked.tolist() == keys[got].tolist()
    # keys given up (consume): the same answer, the int64 keys reused for the order
    given = keys.copy()
    order, ranked = sorted_with_order(given, consume=True)
    assert order.tolist() == got.tolist() and ranked.tolist() == keys[got].tolist()
    if case == "narrow range, many ties":
        assert np.shares_memory(order, given)
    from hta.model import arrays

    monkeypatch.setattr(arrays, "_CHUNK", 1_000)  # positions packed in many chunks
    assert stable_argsort(keys).tolist() == got.tolist()
    if case == "narrow range, many ties":  # sorted runs stay in order, as a merge keeps them
        runs = np.concatenate([np.sort(rng.integers(0, 10**9, n // 4)) for _ in range(4)])
        assert stable_argsort(runs).tolist() == np.argsort(runs, kind="stable").tolist()
