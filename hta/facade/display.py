"""Showing figures from the facade.

In a Jupyter kernel Plotly's own choice of renderer, ``plotly_mimetype``, saves a figure
as Plotly JSON only: JupyterLab draws it, but a notebook executed headless and turned into
HTML (``jupyter nbconvert --to html --execute``) shows no figure, since nbconvert renders
HTML, not Plotly JSON. So, unless the user picked a renderer (``PLOTLY_RENDERER`` or
``plotly.io.renderers.default``), figures are shown with ``plotly_mimetype+notebook``: the
Plotly JSON for JupyterLab and an HTML copy beside it, plotly.js embedded once per kernel
so the HTML works offline. The switch happens when this module is imported in a kernel
(every facade module that shows or returns a figure imports it), so a figure a method
returns, which Jupyter displays itself, gets it too.
"""

from __future__ import annotations

import os
from typing import Any

from hta.progress import in_jupyter_kernel

#: The renderer figures get in a Jupyter kernel unless the user chose one.
NOTEBOOK_RENDERER = "plotly_mimetype+notebook"

_checked = False


def use_notebook_renderer() -> None:
    """In a Jupyter kernel, make :data:`NOTEBOOK_RENDERER` Plotly's default renderer if the
    user kept Plotly's own choice (checked once per process; outside a kernel Plotly is
    not even imported)."""
    global _checked
    if _checked or not in_jupyter_kernel():
        return
    _checked = True
    import plotly.io as pio

    if not os.environ.get("PLOTLY_RENDERER") and pio.renderers.default == "plotly_mimetype":
        pio.renderers.default = NOTEBOOK_RENDERER


def show(figure: Any, **kwargs: Any) -> None:
    """Display a Plotly figure (inline in Jupyter, a browser tab elsewhere), with names
    escaped so that Plotly shows them as text (see ``plain_text_names``)."""
    from hta.plots._figure_parts import plain_text_names

    use_notebook_renderer()
    plain_text_names(figure).show(**kwargs)


use_notebook_renderer()
