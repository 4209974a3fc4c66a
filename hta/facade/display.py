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

Outside a kernel (a script, the Python prompt, IPython's terminal) Plotly's default
renderer opens a browser and serves the figure until the browser fetches it: on a host
without a browser, the headless GPU hosts where such scripts run, the call never returns,
and choosing that renderer first imports Plotly's renderers (nbformat, jsonschema ...),
seconds of work. So there, unless ``PLOTLY_RENDERER`` names a renderer or the call gives
one, a figure is written as an HTML file into :func:`figures_dir` (``HTA_FIGURES_DIR``,
by default ``hta-figures`` in the system's temporary folder), plotly.js beside it once,
and its path is logged: the first at WARNING with how to change it, the others at INFO.
``visualize=False`` builds no figure at all. HTA shows figures with Plotly's renderer
everywhere.
"""

from __future__ import annotations

import itertools
import logging
import os
import re
import tempfile
from pathlib import Path
from typing import Any

from hta.progress import in_jupyter_kernel

logger = logging.getLogger(__name__)

#: The renderer figures get in a Jupyter kernel unless the user chose one.
NOTEBOOK_RENDERER = "plotly_mimetype+notebook"
#: Where figures are written outside a Jupyter kernel (default: see :func:`figures_dir`).
FIGURES_DIR_ENV = "HTA_FIGURES_DIR"

_checked = False
_written = itertools.count(1)


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


def figures_dir() -> Path:
    """The folder figures are written to outside a Jupyter kernel: ``HTA_FIGURES_DIR``,
    else ``hta-figures`` in the system's temporary folder."""
    chosen = os.environ.get(FIGURES_DIR_ENV)
    return Path(chosen).expanduser() if chosen else Path(tempfile.gettempdir()) / "hta-figures"


def _slug(figure: Any) -> str:
    """A file name part from the figure's title: letters and digits, at most 60."""
    title = getattr(getattr(figure.layout, "title", None), "text", None) or "figure"
    words = re.findall(r"[A-Za-z0-9]+", re.sub(r"<[^>]*>", " ", str(title)))
    return "-".join(words)[:60].strip("-").lower() or "figure"


def write_figure_file(figure: Any) -> Path:
    """Write ``figure`` as an HTML file into :func:`figures_dir` (plotly.js beside it, once,
    so the file opens offline) and return its path."""
    folder = figures_dir()
    folder.mkdir(parents=True, exist_ok=True)
    number = next(_written)
    path = folder / f"{_slug(figure)}-{os.getpid()}-{number}.html"
    figure.write_html(str(path), include_plotlyjs="directory", auto_open=False)
    if number == 1:
        logger.warning("outside Jupyter, figures are written as HTML files instead of opened "
                       "in a browser: %s (set %s to choose the folder, PLOTLY_RENDERER=browser "
                       "to open them, or pass visualize=False)", path, FIGURES_DIR_ENV)
    else:
        logger.info("figure written to %s", path)
    return path


def show(figure: Any, **kwargs: Any) -> None:
    """Display a Plotly figure, with names escaped so that Plotly shows them as text (see
    ``plain_text_names``): inline in Jupyter; elsewhere written to an HTML file (see the
    module's docstring) unless a renderer is given or set in ``PLOTLY_RENDERER``."""
    from hta.plots._figure_parts import plain_text_names

    figure = plain_text_names(figure)
    if in_jupyter_kernel() or kwargs.get("renderer") or os.environ.get("PLOTLY_RENDERER"):
        use_notebook_renderer()
        figure.show(**kwargs)
        return
    write_figure_file(figure)


use_notebook_renderer()
