"""Interning strings (names, categories) into dense integer ids."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass
class SymbolTable:
    """Interns strings into dense integer ids."""

    strings: list[str] = field(default_factory=list)
    index: dict[str, int] = field(default_factory=dict)

    def ids(self, values: list[Any]) -> np.ndarray:
        """Return the id of each value, adding unseen ones."""
        index = self.index
        strings = self.strings
        for key in dict.fromkeys(values):
            if key not in index:
                text = key if isinstance(key, str) else ("" if key is None else str(key))
                if text not in index:
                    index[text] = len(strings)
                    strings.append(text)
                index[key] = index[text]
        return np.fromiter(map(index.__getitem__, values), dtype=np.int32, count=len(values))
