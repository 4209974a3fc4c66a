"""Compressed text inside the report: plotly.js and the figures' data, a fraction of the size.

plotly.js is 4.8 MB of JavaScript; embedded as is, every report weighs at least that.
Here text is deflated (raw DEFLATE, level 9) and its bits are written 7 to a character,
so the page carries about 8/7 of the compressed size (base64 would carry 4/3). The page
reads them back with the browser's ``DecompressionStream("deflate-raw")`` (Chromium 80,
Firefox 113, Safari 16.4), offline.

The encoding: the compressed bytes as one bit string, most significant bit first, cut
into 7-bit values (the last padded with zeros). A value becomes the character of that
code, except the three that raw text inside ``<script>`` cannot hold as is: NUL, CR
(read back as LF) and ``<`` (which could start ``</script``). Such a value ``v`` (its
index ``i`` in :data:`AWKWARD`) and the value ``w`` after it become one character,
``U+0100 + 128 i + w``; at the very end, with no value after it, ``U+0300 + i``.
``report.js`` holds the decoder.
"""

from __future__ import annotations

import functools
import zlib

import numpy as np

#: 7-bit values that are never written as themselves.
AWKWARD = (0x00, 0x0D, 0x3C)
PAIR_BASE = 0x100
LAST_BASE = 0x300


def pack(data: bytes) -> tuple[str, int]:
    """``data`` deflated and written 7 bits to a character; (text, compressed bytes)."""
    deflater = zlib.compressobj(9, zlib.DEFLATED, -15, 9)
    compressed = deflater.compress(data) + deflater.flush()
    return encode7(compressed), len(compressed)


def encode7(data: bytes) -> str:
    """The 7-bit text of ``data`` (see the module docstring)."""
    bits = np.unpackbits(np.frombuffer(data, dtype=np.uint8))
    bits = np.concatenate([bits, np.zeros(-len(bits) % 7, dtype=np.uint8)])
    values = (bits.reshape(-1, 7) * (1 << np.arange(6, -1, -1, dtype=np.uint8))).sum(
        axis=1).astype(np.uint32)
    awkward = np.flatnonzero(np.isin(values, AWKWARD)).tolist()
    index = {v: i for i, v in enumerate(AWKWARD)}
    codes = values.copy()
    keep = np.ones(len(values), dtype=bool)
    consumed = -1
    for pos in awkward:
        if pos == consumed:  # already written as the second half of a pair
            continue
        i = index[int(values[pos])]
        if pos + 1 < len(values):
            codes[pos] = PAIR_BASE + 128 * i + int(values[pos + 1])
            keep[pos + 1] = False
            consumed = pos + 1
        else:
            codes[pos] = LAST_BASE + i
    return codes[keep].astype("<u4").tobytes().decode("utf-32-le")


def decode7(text: str, size: int) -> bytes:
    """Inverse of :func:`encode7` (the page does this in JavaScript; kept for tests)."""
    values: list[int] = []
    for ch in text:
        c = ord(ch)
        if c < 0x80:
            values.append(c)
        elif c >= LAST_BASE:
            values.append(AWKWARD[c - LAST_BASE])
        else:
            values += [AWKWARD[(c - PAIR_BASE) >> 7], (c - PAIR_BASE) & 127]
    bits = np.array([(v >> s) & 1 for v in values for s in range(6, -1, -1)], dtype=np.uint8)
    return np.packbits(bits[: 8 * size]).tobytes()


def report_figures(html: str) -> dict:
    """The figures' data of a report's HTML text (packed or plain), by figure id."""
    import json
    import re

    found = re.search(r'<script type="[^"]*" id="hta-figures"(?: data-deflated="(\d+)")?>'
                      r"(.*?)</script>", html, re.S)
    if found is None:
        raise ValueError("no figure data in this HTML: not an hta report")
    size, text = found.groups()
    doc = json.loads(text if size is None else zlib.decompress(decode7(text, int(size)), -15))
    figures, templates = doc["figures"], doc["templates"]
    for fid, index in doc["template_of"].items():  # each style sheet back in its layout
        figures[fid].setdefault("layout", {})["template"] = templates[index]
    return figures


def report_html(html: str) -> str:
    """A report's HTML text with its packed sections written in place, as the page shows
    them once its script has run (the text itself when nothing is packed)."""
    import re
    import zlib

    found = re.search(r'<script type="text/plain" id="hta-sections" data-deflated="(\d+)">'
                      r"(.*?)</script>\n?", html, re.S)
    if found is None:
        return html
    size, text = found.groups()
    sections = zlib.decompress(decode7(text, int(size)), -15).decode()
    html = html[:found.start()] + html[found.end():]
    opened = re.sub(r'  <div id="hta-sections-here"></div>\n  <noscript>.*?</noscript>\n',
                    lambda _: sections, html, count=1, flags=re.S)
    if opened == html:
        raise ValueError("packed sections without their place: not an hta report")
    return opened


@functools.lru_cache(maxsize=1)
def packed_plotly() -> tuple[str, int]:
    """plotly.js of the installed plotly, packed (computed once per process)."""
    import plotly.offline

    return pack(plotly.offline.get_plotlyjs().encode())


def plotly_cdn_url() -> str:
    """The URL of the installed plotly's plotly.js on Plotly's CDN."""
    from plotly.offline import get_plotlyjs_version

    return f"https://cdn.plot.ly/plotly-{get_plotlyjs_version()}.min.js"


__all__ = ["AWKWARD", "decode7", "encode7", "pack", "packed_plotly", "plotly_cdn_url",
           "report_figures", "report_html"]
