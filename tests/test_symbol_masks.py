"""Per-process masks over a symbol table (hta.model.symbol_masks): the same verdicts as
testing every name, each name tested once per table and test, new names only when the
table grows, and a table rewritten in place tested again."""

from __future__ import annotations

import re

import numpy as np

from hta.model import symbol_masks
from hta.model.symbol_masks import symbol_ids, symbol_mask

STEP = re.compile(r"ProfilerStep#(\d+)")


def test_the_verdicts_are_those_of_every_name() -> None:
    table = ["aten::mm", "ProfilerStep#3", "x ProfilerStep#4", "ProfilerStep#12"]
    assert symbol_mask(table, STEP.match).tolist() == [False, True, False, True]
    assert symbol_mask(table, STEP.search).tolist() == [False, True, True, True]
    assert symbol_ids(table, STEP.match).tolist() == [1, 3]
    assert symbol_ids(table, STEP.match).dtype == np.int64
    assert not symbol_mask(table, STEP.match).flags.writeable


def test_each_name_is_tested_once_and_only_new_names_after_growth() -> None:
    seen: list[str] = []

    def test(name: str) -> bool:
        seen.append(name)
        return name.startswith("a")

    table = ["a1", "b1"]
    assert symbol_mask(table, test).tolist() == [True, False]
    assert symbol_mask(table, test).tolist() == [True, False]
    assert seen == ["a1", "b1"]  # the second call tested nothing
    table += ["a2"]  # a shared table grows by appends
    assert symbol_mask(table, test).tolist() == [True, False, True]
    assert seen == ["a1", "b1", "a2"]
    other = ["a1", "b1"]  # an equal table is another table
    assert symbol_mask(other, test).tolist() == [True, False]
    assert seen == ["a1", "b1", "a2", "a1", "b1"]


def test_a_table_rewritten_in_place_is_tested_again() -> None:
    def test(name: str) -> bool:
        return name.startswith("a")

    table = ["a1", "b1"]
    assert symbol_mask(table, test).tolist() == [True, False]
    table[1] = "a9"
    assert symbol_mask(table, test).tolist() == [True, True]


def test_the_kept_verdicts_are_bounded(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(symbol_masks, "MAX_VERDICTS", 5)
    monkeypatch.setattr(symbol_masks, "_MASKS", {})
    monkeypatch.setattr(symbol_masks, "_KEPT", [0])
    tables = [[f"n{i}{j}" for j in range(3)] for i in range(4)]
    for t in tables:
        assert symbol_mask(t, str.isalpha).tolist() == [False] * 3
        assert symbol_masks._KEPT[0] <= 5
    big = [f"x{i}" for i in range(9)]  # larger than the bound: answered, not kept
    assert symbol_mask(big, str.isalpha).tolist() == [False] * 9
    assert symbol_masks._KEPT[0] <= 5


def test_lazy_verdicts_test_only_the_names_asked_for_once_per_table() -> None:
    """symbol_verdicts: the same verdicts as symbol_mask at the ids asked for; a name is
    tested when an id first asks for it, once per table and key (the ranks sharing the
    table share the verdicts), again after growth only for new names, and all again when
    the table is rewritten in place."""
    from hta.model.symbol_masks import symbol_verdicts

    batches: list[list[str]] = []

    def test_names(names: list[str]) -> list[bool]:
        batches.append(list(names))
        return [n.startswith("a") for n in names]

    table = ["a1", "b1", "a2", "b2"]
    ids = np.asarray([2, 2, 0, 2], dtype=np.int32)
    assert symbol_verdicts(table, "starts-a", ids, test_names).tolist() == [
        True, True, True, True]
    assert batches == [["a1", "a2"]]  # each asked name once; ids 1 and 3 untested
    got = symbol_verdicts(table, "starts-a", np.arange(4), test_names)
    assert got.tolist() == symbol_mask(table, lambda n: n.startswith("a")).tolist()
    assert batches[1:] == [["b1", "b2"]]
    assert symbol_verdicts(table, "starts-a", np.arange(4), test_names).tolist() == \
        got.tolist() and len(batches) == 2  # all kept: nothing tested
    assert symbol_verdicts(table, "starts-a", np.zeros(0, np.int64), test_names).size == 0
    table.append("a3")  # grows by appends: only the new name is tested
    assert symbol_verdicts(table, "starts-a", np.asarray([4, 0]), test_names).tolist() == [
        True, True]
    assert batches[2:] == [["a3"]]
    table[4] = "b9"  # rewritten in place (its last name): every name tested again
    assert symbol_verdicts(table, "starts-a", np.asarray([4, 0]), test_names).tolist() == [
        False, True]
    assert batches[3:] == [["a1", "b9"]]
    other = list(table)  # an equal table is another table
    symbol_verdicts(other, "starts-a", np.asarray([0]), test_names)
    assert batches[4:] == [["a1"]]
