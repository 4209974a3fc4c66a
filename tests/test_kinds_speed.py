"""The fast kind lookup gives exactly the kinds of the rule-by-rule definition.

:class:`hta.model.rules.RuleSet` answers a (category, name) pair with a literal prefilter
(:mod:`hta.model.prefilter`), a per-category candidate list and a per-process memo. The
definition is still "the first rule whose ``Rule.matches`` is true"; these tests compare
the two on every distinct pair of the real and sample traces, on generated names (mixed
case, non-ASCII look-alikes, names thousands of characters long) and on user rules the
prefilter cannot read, and check that the prefilter stays sound and keeps its speed.
"""

from __future__ import annotations

import gzip
import random
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import orjson
import pytest
from conftest import SAMPLE_TRACES, SHARED_TRACES, absent_reason

from hta.model.categories import KERNEL_FAMILIES
from hta.model.prefilter import literal_filter, may_match
from hta.model.rules import (
    KERNEL_FALLBACK,
    OTHER_FALLBACK,
    Rule,
    RuleSet,
    _matcher_for,
    categories,
    classify,
)


def reference_rule(rules: RuleSet, cat: str, name: str) -> tuple[Rule, bool]:
    """The definition: rules tried one by one with ``Rule.matches``."""
    for rule in rules.rules:
        if rule.matches(cat, name):
            return rule, True
    if KERNEL_FALLBACK.matches(cat, name):
        return KERNEL_FALLBACK, False
    return OTHER_FALLBACK, True


def assert_same(rules: RuleSet, pairs: Iterable[tuple[str, str]]) -> int:
    """The fast lookups agree with the definition on every pair: the first rule
    (``rule_for``) and the kind alone (``kind``, which tries only the rules that can
    change it, from a matcher that never answered ``rule_for``)."""
    fresh = RuleSet(rules.user_rules)
    fresh._matcher = type(_matcher_for(rules.rules))(rules.rules)  # an empty memo
    kinds_only = RuleSet(rules.user_rules)
    kinds_only._matcher = type(_matcher_for(rules.rules))(rules.rules)
    count = 0
    for cat, name in pairs:
        expected = reference_rule(rules, cat, name)
        assert kinds_only.kind(cat, name) == expected[0].kind, (cat, name)
        assert fresh.rule_for(cat, name) == expected, (cat, name)
        assert fresh.kind(cat, name) == expected[0].kind, (cat, name)  # from rule_for's memo
        count += 1
    return count


def trace_pairs(folder: Path) -> set[tuple[str, str]]:
    """Distinct (cat, name) of the complete events of every trace file under a folder."""
    pairs: set[tuple[str, str]] = set()
    for path in sorted(folder.rglob("*.json*")):
        if ".hta_cache" in path.parts:
            continue
        raw = path.read_bytes()
        if path.suffix == ".gz":
            raw = gzip.decompress(raw)
        try:
            doc = orjson.loads(raw)
        except orjson.JSONDecodeError:
            continue
        events = doc.get("traceEvents") if isinstance(doc, dict) else None
        for ev in events or ():
            if isinstance(ev, dict) and isinstance(ev.get("name"), str):
                pairs.add((str(ev.get("cat", "")), ev["name"]))
    return pairs


def test_real_traces_same_kinds_and_categories() -> None:
    if not SHARED_TRACES.exists():
        pytest.skip(absent_reason(SHARED_TRACES))
    pairs = trace_pairs(SHARED_TRACES)
    kernels = {p for p in pairs if p[0] == "kernel"}
    assert len(kernels) > 300  # the GPU traces' kernel names are there
    rules = RuleSet()
    assert assert_same(rules, sorted(pairs)) == len(pairs)
    for cat, name in sorted(kernels):
        rule, _ = reference_rule(rules, cat, name)
        assert rules.category_of(cat, name) == (rule.category or "other")


def test_sample_traces_same_kinds() -> None:
    pairs = trace_pairs(SAMPLE_TRACES)
    assert pairs, "the sample traces hold events"
    assert_same(RuleSet(), sorted(pairs))


_NOISE = ["void ", "at::native::", "<float, 4>", "(anonymous namespace)::", "_kernel",
          "sm90_", "Kernel2", "::", "_", " ", "-", "->", "1688", "fp16", "x", "K", "k",
          "\u212a", "\u017f", "\u0130", "\u0131", "\u00e9", "S", "s", "ernode", "ck", "::impl"]


def _words() -> list[str]:
    """Words taken from the default rules' patterns, so generated names hit them."""
    words: set[str] = set()
    for pattern in [f.name for f in KERNEL_FAMILIES] + [r.name or "" for r in RuleSet().rules]:
        words.update(w for w in re.findall(r"[A-Za-z][A-Za-z0-9_:]+", pattern) if len(w) > 1)
    return sorted(words)


def _mangle(word: str, rng: random.Random) -> str:
    """A word with random case, a letter dropped, or a look-alike letter swapped in."""
    roll = rng.random()
    if roll < 0.3:
        return "".join(c.upper() if rng.random() < 0.5 else c.lower() for c in word)
    if roll < 0.4 and len(word) > 2:
        cut = rng.randrange(len(word))
        return word[:cut] + word[cut + 1:]
    if roll < 0.5:
        return word.replace("k", "\u212a").replace("s", "\u017f").replace("i", "\u0131")
    return word


def generated_names(count: int, seed: int = 28) -> list[str]:
    rng = random.Random(seed)
    words = _words()
    names = []
    for _ in range(count):
        parts = [(_mangle(rng.choice(words), rng) if rng.random() < 0.5 else rng.choice(_NOISE))
                 for _ in range(rng.randint(1, 12))]
        name = "".join(parts)
        if rng.random() < 0.05:
            name = name * rng.randint(20, 60)  # Triton/Inductor-length names
        names.append(name)
    return names


@pytest.mark.parametrize("cat", ["kernel", "Kernel", "cuda_runtime", "cuda_driver", "gpu_memcpy",
                                 "Memcpy", "mtia_ccp_events", "cpu_op", "xpu_kernel", "other"])
def test_generated_names_same_kinds(cat: str) -> None:
    names = generated_names(1500, seed=hash(cat) % 1000)
    names += ["HtoD", "Memcpy Host -> Device", "Device->Pinned", "PtoP", "Peer", "DtoD",
              "cudaLaunchKernel", "cudaLaunchKernel_v7000", "hipMemcpyAsync", "synchronize",
              "event_record", "dma_request", "", "\u212aernel", "ncclDevKernel_AllReduce"]
    assert assert_same(RuleSet(), [(cat, n) for n in names]) == len(names)


def test_user_rules_the_prefilter_cannot_read() -> None:
    user = [
        Rule("communication", cat=r"^kernel$", name=r"(?P<w>ab)c(?P=w)"),  # back reference
        Rule("memset", cat=r"^kernel$", name=r"(?x) zero \s* fill"),  # verbose flag
        Rule("memcpy_dtod", cat=r"^kernel$", name=r"(?i)stra\u00dfe|\u212aelvin"),  # non-ASCII
        Rule("memcpy_other", cat=r"^kernel$", name=r"(?<=pre)fix(?!ed)"),  # lookarounds
        Rule("gpu_sync", cat=None, name=r"^$"),  # empty names of any category
        Rule("runtime_other", cat=r"kern", name=r"[xyz]{3,}|q+w"),  # classes and repeats
    ]
    rules = RuleSet(user)
    names = generated_names(800, seed=5) + [
        "abcab", "abcac", "zerofill", "zero   fill", "STRASSE", "strasse", "Stra\u00dfe",
        "kelvin", "Kelvin", "prefix", "prefixed", "fix", "", "xxyz", "qqqw", "w"]
    for cat in ("kernel", "cuda_runtime", "cpu_op", "kernelish"):
        assert_same(rules, [(cat, n) for n in names])


def test_prefilter_is_sound() -> None:
    """Whenever a pattern matches an ASCII name, its filter lets the name through."""
    patterns = [f.name for f in KERNEL_FAMILIES] + [
        r.name for r in RuleSet().rules if r.name] + [
        r"a(b|c)+d", r"(?i)x(yz)?w", r"foo|bar(baz|qux)", r"(?:ab){2,}", r"^k\w+l$",
        r"(?i)(?:elementwise|vectorized)_kernel<\d+>"]
    names = [n for n in generated_names(3000, seed=7) if n.isascii()]
    names += ["abbcd", "XYZW", "xw", "barqux", "abab", "kernel", "Vectorized_Kernel<4>"]
    checked = 0
    for pattern in patterns:
        compiled, node = re.compile(pattern), literal_filter(pattern)
        for name in names:
            if compiled.search(name):
                assert may_match(node, name.lower()), (pattern, name)
                checked += 1
    assert checked > 1000


def test_prefilter_reads_the_default_rules() -> None:
    """Every default name rule gets a filter, and on the real or generated kernel names
    the filter rules out most rules: few regular expressions run per name."""
    rules = RuleSet()
    named = [r for r in rules.rules if r.name is not None]
    assert all(literal_filter(r.name) is not None for r in named)
    matcher = _matcher_for(rules.rules)
    names = [n for n in generated_names(2000, seed=11) if n.isascii()]
    runs = 0
    for name in names:
        rows, _ = matcher._candidates("kernel")
        lowered = name.lower()
        for i in rows:
            pattern = matcher.pattern(i)
            if pattern is None or not may_match(matcher.filter(i), lowered):
                continue
            runs += 1
            if pattern.search(name):
                break
    kernel_rules = sum(1 for r in named if r.cat is not None and re.search(r.cat, "kernel"))
    assert runs < 0.25 * kernel_rules * len(names)


def test_classify_and_categories_use_the_same_answers() -> None:
    import numpy as np

    symbols = ["kernel", "cuda_runtime", "ncclDevKernel_AllReduce", "cudaLaunchKernel",
               "void at::native::vectorized_elementwise_kernel<4>", "sm80_xmma_gemm", "odd"]
    cat = np.array([0, 1, 0, 0, 0, 1], dtype=np.int32)
    name = np.array([2, 3, 4, 5, 6, 6], dtype=np.int32)
    codes, unmatched = classify(symbols, cat, name, RuleSet())
    cats = categories(symbols, cat, name, RuleSet())
    from hta.model.rules import KINDS
    assert [KINDS[c] for c in codes] == ["communication", "runtime_launch", "computation",
                                         "computation", "computation", "runtime_other"]
    assert unmatched.tolist() == [False, False, False, False, True, False]
    assert cats.tolist() == ["communication", "", "elementwise", "GEMM", "other", ""]


def test_prefiltered_patterns_answer_like_their_regex() -> None:
    """The findings' GEMM patterns (wrapped in :class:`Prefiltered`) find exactly what
    their regular expressions find, on real kernel names and generated ones."""
    from hta.analysis.findings.kernel_common import FP32_GEMM
    from hta.analysis.findings.kernels import TENSOR_GEMM, TF32_GEMM
    from hta.model.prefilter import Prefiltered

    names = generated_names(3000, seed=3) + [
        "ampere_sgemm_128x64_nn", "sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize",
        "cutlass_80_tensorop_s1688gemm_128x64_32x6_nt_align1", "Cijk_Ailk_Bljk_SB_MT64",
        "Cijk_Ailk_Bljk_HHS_BH_MT128", "nvjet_tst_128x256", "void gemmSN_TN_kernel<float",
        "magma_sgemmEx_kernel<float>", "volta_fp16_s884gemm_fp16_128x128",
        "xmma_gemm_f32f32_ffma_", "fbgemm_bf16_kernel", "sgemm_largek_lds64", "xAB  cd", "eFG"]
    if SHARED_TRACES.exists():
        names += sorted(n for c, n in trace_pairs(SHARED_TRACES) if c == "kernel")
    for wrapped in (FP32_GEMM, TENSOR_GEMM, TF32_GEMM,
                    Prefiltered(re.compile(r"(?x) ab \s* cd | e(?=fg)", re.IGNORECASE))):
        assert isinstance(wrapped, Prefiltered) and wrapped.filter is not None
        hits = 0
        for name in names:
            expected = wrapped.regex.search(name)
            got = wrapped.search(name)
            assert (got is None) == (expected is None), (wrapped.pattern, name)
            if got is not None:
                assert got.span() == expected.span()
                hits += 1
        assert hits > 0, wrapped.pattern


def test_default_patterns_compile_and_user_patterns_are_checked_when_written() -> None:
    """The default tables' patterns are compiled on first use, not at import: all of them
    must compile; a user's rule still fails where it is written."""
    from hta.model.rules import DEFAULT_RULES

    for rule in (*DEFAULT_RULES, KERNEL_FALLBACK, OTHER_FALLBACK):
        for pattern in (rule.cat, rule.name):
            if pattern is not None:
                re.compile(pattern)
    with pytest.raises(re.error):
        Rule("computation", name="(unclosed")


def _job_with_unclassified_kernels(folder: Path) -> Path:
    """One rank with kernels of every answer: a family kernel, unknown kernels, an NCCL
    kernel, an unknown kernel carrying collective args (communication, not unclassified),
    a copy; three steps."""
    from kineto_builder import TraceBuilder

    b = TraceBuilder()
    names = ["sm80_xmma_gemm_f16", "my_fused_thing", "ncclDevKernel_AllReduce_Sum_f32",
             "another_mystery_kernel"]
    for step in range(3):
        t = 1_000_000 + step * 1_000_000
        b.annotation(f"ProfilerStep#{step}", t, 900_000)
        for i, name in enumerate(names):
            args = {"Collective name": "allreduce"} if name == "another_mystery_kernel" else {}
            b.launch_kernel(name, cpu_ts=t + 10_000 + i * 100_000, cpu_dur=5_000,
                            gpu_ts=t + 20_000 + i * 100_000, gpu_dur=50_000, **args)
        b.memcpy("HtoD", cpu_ts=t + 600_000, cpu_dur=5_000, gpu_ts=t + 610_000, gpu_dur=10_000)
    return b.write(folder / "rank0.json")


def test_loading_classifies_kinds_and_the_unclassified_mask_follows(tmp_path: Path) -> None:
    """A loaded rank has its ``kind`` column (found with the rules that can change a kind
    only) and computes ``unclassified`` when it is first read: both as
    :func:`classify` gives them, also after rows are dropped or symbols remapped."""
    import numpy as np

    from hta.trace_analysis import TraceAnalysis

    _job_with_unclassified_kernels(tmp_path)

    def load() -> Any:
        return TraceAnalysis(trace_dir=tmp_path, cache=False, progress=False).t.rank(0)

    rt = load()
    coll = rt.tables["collective_args"]["index"].to_numpy()
    codes, mask = classify(rt.symbols, rt.events["cat"].to_numpy(),
                           rt.events["name"].to_numpy(), RuleSet(), coll)
    assert np.array_equal(rt.events["kind"].cat.codes.to_numpy(), codes)
    assert rt.__dict__["_unclassified_rules"] is not None  # not computed while loading
    assert np.array_equal(rt.unclassified, mask) and mask.sum() == 3  # my_fused_thing x3
    assert rt.__dict__["_unclassified_rules"] is None  # computed once, kept
    rt = load()
    keep = np.arange(len(rt.events)) % 3 != 1
    rt.filter_rows(keep)
    assert np.array_equal(rt.unclassified, mask[keep])
    rt = load()
    order = np.arange(len(rt.symbols))[::-1]
    rt.remap_symbols(order, [rt.symbols[i] for i in order])
    assert np.array_equal(rt.unclassified, mask)
