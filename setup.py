"""Build the optional native parts: the column builder (``hta.kineto._scan``), the event
splitter for any JSON layout (``hta.kineto._split``), the call-stack walk
(``hta.model._stack``) and the what-if replay's schedule (``hta.analysis.whatif._schedule``).

Everything else is declared in ``pyproject.toml``. The extension is optional: where no C
compiler is available the package installs without them and the loader uses its pure-Python
decoder, NumPy call-stack walk and NumPy schedule (see ``docs/performance.md``).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "hta.kineto._scan",
            sources=["hta/kineto/_native/scan.c"],
            depends=[f"hta/kineto/_native/scan_{part}.h" for part in ("fields", "intern", "lex")],
            extra_compile_args=["-O2"],
            optional=True,
        ),
        Extension(
            "hta.kineto._split",
            sources=["hta/kineto/_native/split.c"],
            extra_compile_args=["-O2"],
            optional=True,
        ),
        Extension(
            "hta.model._stack",
            sources=["hta/model/_native/stack.c"],
            extra_compile_args=["-O2"],
            optional=True,
        ),
        Extension(
            "hta.analysis.whatif._schedule",
            sources=["hta/analysis/whatif/_native/schedule.c"],
            extra_compile_args=["-O2"],
            libraries=["m"],  # llrint
            optional=True,
        ),
    ]
)
