"""Display names: a kernel's function name and its key template parameters, short enough
for a terminal line.

Demangled CUDA kernel names run to hundreds of characters (a template argument per
functor, lambda and array type, then the parameter list). Tables printed on a terminal
show :func:`display_name` instead; ``--json``, the tables returned in Python and the
report's tooltips keep the whole name. The rule, on a demangled name:

1. a name that does not read as a C++ signature (:func:`is_signature`: operators,
   Python frames, annotations, ``Memcpy HtoD (Pinned -> Device)``,
   ``ampere_sgemm_64x32_sliced1x4_nn``) is shown as it is; a signature without a
   template argument list is its short name (:func:`hta.analysis.names.short_name`: no
   parameter list, no return type);
2. otherwise the function's own name (namespaces dropped) followed by its template
   arguments, each simplified: namespaces dropped (``at::native::`` ...), a lambda named
   after the function that holds it (``threshold_kernel_impl::λ``), a nested argument
   list longer than :data:`NESTED_MAX` characters shown as ``<…>``;
3. arguments that do not fit in ``width`` characters are replaced by ``…``;
4. a mangled name the demangler could not read shows its leading names
   (``cutlass__5x_cudnn::Kernel<…>``).

Examples::

    void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous
    namespace)::threshold_kernel_impl<float>(at::TensorIteratorBase&, float,
    float)::{lambda(float, float)#1}, at::detail::Array<char*, 3> >(int, ...)
        -> vectorized_elementwise_kernel<4, threshold_kernel_impl::λ, Array<char*, 3>>
    ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)
        -> ncclDevKernel_AllReduce_Sum_f32_RING_LL
"""

from __future__ import annotations

import re
from functools import lru_cache

from hta.analysis.names import short_name

__all__ = ["DISPLAY_WIDTH", "NESTED_MAX", "display_name", "is_signature"]

#: Longest display name (characters) unless the caller asks for another width.
DISPLAY_WIDTH = 72
#: A nested template argument list longer than this is shown as ``<…>``.
NESTED_MAX = 20

_NAMESPACES = re.compile(r"(?:\(anonymous namespace\)::|\b[A-Za-z_]\w*::)+")
_SPACES = re.compile(r"\s+")
_OPEN = {"<": ">", "(": ")", "[": "]", "{": "}"}


def _closing(text: str, i: int) -> int:
    """Index of the bracket closing the one at ``i`` (any of ``<([{``), -1 if none."""
    stack = [_OPEN[text[i]]]
    for j in range(i + 1, len(text)):
        ch = text[j]
        if ch in _OPEN:
            stack.append(_OPEN[ch])
        elif ch == stack[-1]:
            stack.pop()
            if not stack:
                return j
        elif ch in ">)]}" and ch != "-" and not (ch == ">" and text[j - 1] == "-"):
            return -1  # unbalanced: not a list this rule reads
    return -1


def _top_level_split(text: str) -> list[str]:
    """``text`` split at the commas outside brackets."""
    parts, depth, start = [], 0, 0
    for j, ch in enumerate(text):
        if ch in "<([{":
            depth += 1
        elif ch in ">)]}" and not (ch == ">" and j and text[j - 1] == "-"):
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:j])
            start = j + 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def _simplify(arg: str) -> str:
    """One template argument without namespaces, lambdas named by their owner, and long
    nested lists shortened."""
    if "{lambda" in arg:
        owner = arg[:arg.find("{lambda")].rstrip(":")
        owner_name = short_name(owner) if owner else ""
        return f"{_NAMESPACES.sub('', owner_name)}::λ" if owner_name else "λ"
    arg = _NAMESPACES.sub("", _SPACES.sub(" ", arg))
    out, i = [], 0
    while i < len(arg):
        if arg[i] in "<(":
            j = _closing(arg, i)
            if j < 0:
                out.append(arg[i:])
                break
            inner = arg[i:j + 1]
            if arg[i] == "(":  # a function type's parameters: left out
                out.append("(…)" if len(inner) > 2 else "()")
            elif len(inner) - 2 > NESTED_MAX:
                out.append("<…>")
            else:
                out.append("<" + ", ".join(_simplify(a) for a in _top_level_split(
                    inner[1:-1])) + ">")
            i = j + 1
            continue
        out.append(arg[i])
        i += 1
    return "".join(out).strip()


def _mangled_display(name: str) -> str:
    """``ns::Function<…>`` from a mangled name the demangler could not read (its leading
    length-prefixed identifiers), or the name itself when it has none."""
    i = 3 if name.startswith("_ZN") else 2
    parts = []
    while i < len(name) and name[i].isdigit():
        j = i
        while j < len(name) and name[j].isdigit():
            j += 1
        size = int(name[i:j])
        parts.append(name[j:j + size])
        i = j + size
    if not parts:
        return name
    return "::".join(parts[-2:]) + ("<…>" if name[i:i + 1] == "I" else "")


_SIGNATURE_END = re.compile(r"[)>]\s*(?:const)?\s*(?:&&?)?\s*(?:\[clone [^\]]*\])?\s*$")


def is_signature(name: str) -> bool:
    """Whether ``name`` reads as a C++ function signature: it ends with its parameter or
    template list (qualifiers aside), and the text before its first ``<`` or ``(`` ends
    with the function's name (:func:`~hta.analysis.names.short_name`). Operator names,
    Python frames, annotations and copies (``Memcpy HtoD (Pinned -> Device)``) are not."""
    if not name or not _SIGNATURE_END.search(name):
        return False
    brief = short_name(name)
    plain = name.replace("(anonymous namespace)", "_" * len("(anonymous namespace)"))
    cut = min((i for i in (plain.find("<"), plain.find("(")) if i >= 0), default=-1)
    last = brief.rsplit("::", 1)[-1]
    return brief != name and cut > 0 and bool(last) and plain[:cut].rstrip().endswith(last)


@lru_cache(maxsize=1 << 14)
def display_name(name: str, width: int = DISPLAY_WIDTH) -> str:
    """A short display form of a (demangled) kernel or operator name: see the module
    docstring. Never longer than ``width`` characters unless the function's own name is.
    A mangled name (``_Z...``) that reached here undemangled shows its leading names."""
    if name.startswith("_Z"):
        return _mangled_display(name)
    if not is_signature(name):
        return name
    if "<" not in name:
        return short_name(name)
    qualified = short_name(name)
    function = _NAMESPACES.sub("", qualified) or qualified
    at = name.find(qualified + "<") if qualified else -1
    if at < 0:
        return function
    start = at + len(qualified)
    end = _closing(name, start)
    if end < 0:
        return function
    args = [_simplify(a) for a in _top_level_split(name[start + 1:end])]
    text = f"{function}<{', '.join(args)}>"
    while len(text) > width and args:
        args = args[:-1]
        text = f"{function}<{', '.join([*args, '…'])}>"
    return text
