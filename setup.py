"""Build the optional native column builder (``hta.loading._scan``).

Everything else is declared in ``pyproject.toml``. The extension is optional: where no C
compiler is available the package installs without it and the loader uses its pure-Python
decoder (see ``docs/performance.md``).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "hta.loading._scan",
            sources=["hta/loading/_native/scan.c"],
            extra_compile_args=["-O2"],
            optional=True,
        )
    ]
)
