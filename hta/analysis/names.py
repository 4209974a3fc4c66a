"""Short names: operator and kernel names without template arguments and parameter lists.

``short_name(name)`` lets two traces match a kernel whose template parameters or signature
changed (``void foo<int, 4>(float*, int)`` and ``void foo<half, 8>(half*, int)`` are both
``foo``). The rule, applied in this order:

1. ``ProfilerStep#N`` -> ``ProfilerStep`` (so steps of different numbers match).
2. A Python frame ``path.py(LINE): func`` -> ``path.py: func`` (the line number goes, the file
   and function stay).
3. An Itanium-mangled name (``_ZN7cutlass...``) is demangled first
   (:func:`hta.model.demangle.demangle`), so it shortens, and matches, as its demangled
   twin does.
4. A name without ``<`` and ``(`` is returned unchanged (``aten::mm``, ``nccl:all_reduce``,
   ``autograd::engine::evaluate_function: AddmmBackward0``, Triton kernels ...).
5. Otherwise the name is read as a demangled C++ signature, left to right:

   * a *template argument list* ``<...>`` (balanced, directly after an identifier) is removed;
   * a *parameter list* ``(...)`` (balanced, directly after an identifier, ``>``, ``)``,
     ``]`` or an operator) is removed, and everything after the last top-level parameter
     list goes too: ``const``, ``&&``, ``[clone .kd]``;
   * kept as they are: ``(anonymous namespace)``; operator names (``operator()``,
     ``operator<``, ``operator<<``, ``operator->``, ``operator bool`` ...); lambda and unnamed
     type markers in braces, with their own parameter lists removed (``{lambda(int)#1}`` ->
     ``{lambda#1}``);
   * a parenthesis or ``<`` after a space or at the start is text, not a list:
     ``Memcpy HtoD (Pinned -> Device)`` and ``<built-in method ...>`` stay whole;
   * then the return type goes: what is left is split at spaces (outside the kept pieces
     above) and the last word is the short name.

   If nothing was removed the name is returned unchanged; an unbalanced bracket keeps the
   rest of the name as it is.

Examples::

    void foo<int, 4>(float*, int)
        -> foo
    void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>,
         at::detail::Array<char*, 3> >(int, ...)
        -> at::native::vectorized_elementwise_kernel
    ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)
        -> ncclDevKernel_AllReduce_Sum_f32_RING_LL
    void at::native::(anonymous namespace)::multi_tensor_apply_kernel<...>(...)
        -> at::native::(anonymous namespace)::multi_tensor_apply_kernel
    foo(int)::{lambda(float)#1}::operator()(float) const
        -> foo::{lambda#1}::operator()
    bool ns::Key::operator<(ns::Key const&) const
        -> ns::Key::operator<

Short names merge every instantiation of a template: all ``cutlass::Kernel<...>`` GEMMs
become one ``cutlass::Kernel`` row. Compare full names when that matters.
"""

from __future__ import annotations

import re
from functools import lru_cache

from hta.model.demangle import demangle

_STEP = re.compile(r"^ProfilerStep#\d+$")
_PY_FRAME = re.compile(r"^(.+\.py)\((\d+)\): (.*)$", re.DOTALL)
_ANON = "(anonymous namespace)"
_OPERATOR = "operator"
#: Operator symbols, longest first so that ``<<=`` wins over ``<<`` and ``<``.
_OPERATOR_SYMBOLS = (
    "new[]", "delete[]", "->*", "<=>", "<<=", ">>=", "()", "[]", "->", "<<", ">>", "<=", ">=",
    "==", "!=", "&&", "||", "++", "--", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", '""',
    "<", ">", "+", "-", "*", "/", "%", "^", "&", "|", "~", "!", "=", ",",
)
_OPERATOR_WORD = re.compile(r"\s*([A-Za-z_][\w:]*(?:\s*[*&]+)?)")
#: Stands for a space inside a kept piece while the return type is split off.
_SPACE = "\x00"


def _is_ident(ch: str) -> bool:
    return ch.isalnum() or ch in "_$"


@lru_cache(maxsize=1 << 16)
def short_name(name: str) -> str:
    """The short form of an operator or kernel name (rule in the module docstring)."""
    if not name:
        return name
    if _STEP.match(name):
        return "ProfilerStep"
    frame = _PY_FRAME.match(name)
    if frame:
        return f"{frame.group(1)}: {frame.group(3)}"
    if name.startswith("_Z"):
        name = demangle(name)  # a mangled kernel name shortens as its demangled twin
    if "<" not in name and "(" not in name:
        return name
    text, stripped, cut = _scan(name)
    if not stripped:
        return name
    if cut is not None:
        text = text[:cut]
    words = text.strip().split(" ")
    return words[-1].replace(_SPACE, " ") if words[-1] else name


def _scan(name: str) -> tuple[str, bool, int | None]:
    """(name with lists removed and kept spaces protected, whether anything was removed,
    length of the output at the end of the last removed parameter list)."""
    out: list[str] = []
    n = len(name)
    i = 0
    stripped = False
    cut: int | None = None
    after_operator = False
    while i < n:
        ch = name[i]
        if name.startswith(_ANON, i):
            out.append(_ANON.replace(" ", _SPACE))
            i += len(_ANON)
            after_operator = False
            continue
        if ch == "o" and _operator_at(name, i, out):
            token, i = _operator_token(name, i)
            out.append(token)
            after_operator = True
            continue
        prev = out[-1][-1] if out else ""
        if ch == "{":
            j = _matching(name, i, "{", "}")
            if j < 0:
                out.append(name[i:])
                break
            inner, inner_stripped, _ = _scan(name[i + 1:j])
            stripped |= inner_stripped
            out.append("{" + inner.replace(" ", _SPACE) + "}")
            i = j + 1
            after_operator = False
            continue
        if ch == "<" and (_is_ident(prev) or prev in ")]}") and not after_operator:
            j = _matching_angle(name, i)
            if j < 0:
                out.append(name[i:])
                break
            stripped = True
            i = j + 1
            continue
        if ch == "(" and (after_operator or _is_ident(prev) or prev in ")]}>"):
            j = _matching(name, i, "(", ")")
            if j < 0:
                out.append(name[i:])
                break
            stripped = True
            cut = sum(len(s) for s in out)
            i = j + 1
            after_operator = False
            continue
        out.append(ch)
        after_operator = False
        i += 1
    return "".join(out), stripped, cut


def _operator_at(name: str, i: int, out: list[str]) -> bool:
    """Whether ``operator`` at ``i`` is the keyword (not part of a longer identifier)."""
    if not name.startswith(_OPERATOR, i):
        return False
    if out and _is_ident(out[-1][-1]):
        return False
    j = i + len(_OPERATOR)
    return j >= len(name) or not _is_ident(name[j])


def _operator_token(name: str, i: int) -> tuple[str, int]:
    """The operator name starting at ``i`` (spaces protected) and the index after it."""
    j = i + len(_OPERATOR)
    k = j
    while k < len(name) and name[k] == " ":
        k += 1
    for symbol in _OPERATOR_SYMBOLS:
        if name.startswith(symbol, k) and not (symbol[0].isalpha()
                                                and k + len(symbol) < len(name)
                                                and _is_ident(name[k + len(symbol)])):
            end = k + len(symbol)
            return name[i:end].replace(" ", _SPACE), end
    word = _OPERATOR_WORD.match(name, j)
    if word:  # operator new, operator delete, conversion operators (operator bool)
        return name[i:word.end()].replace(" ", _SPACE), word.end()
    return name[i:j], j


def _matching(name: str, i: int, open_: str, close: str) -> int:
    """Index of the bracket closing the one at ``i`` (only ``open_``/``close`` counted)."""
    depth = 0
    for j in range(i, len(name)):
        ch = name[j]
        if ch == open_:
            depth += 1
        elif ch == close:
            depth -= 1
            if depth == 0:
                return j
    return -1


def _matching_angle(name: str, i: int) -> int:
    """Index of the ``>`` closing the template list at ``i``; parentheses inside are skipped
    whole (``<(N > 3)>``), ``->`` is not a bracket."""
    depth = 0
    j = i
    n = len(name)
    while j < n:
        ch = name[j]
        if ch == "(":
            k = _matching(name, j, "(", ")")
            if k < 0:
                return -1
            j = k + 1
            continue
        if ch == "<":
            depth += 1
        elif ch == ">" and not (j > 0 and name[j - 1] == "-"):
            depth -= 1
            if depth == 0:
                return j
        j += 1
    return -1
