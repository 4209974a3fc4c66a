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
