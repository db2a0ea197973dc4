"""Explorable figures that work in Jupyter, in Colab *and* on the static website.

One call per figure::

    import numpy as np
    import matplotlib.pyplot as plt
    import lrnn

    def plot(radius, length):
        t = np.arange(length)
        fig, ax = plt.subplots(figsize=(5, 3), layout="constrained")
        ax.semilogy(t, radius ** t)
        ax.set(title=f"|λ|^t for |λ| = {radius}", xlabel="time step t", ylabel="|λ|^t")
        return fig                          # return the Figure; explore() closes it

    lrnn.course.widgets.explore(plot, {"radius": [0.9, 0.99, 1.0, 1.01], "length": [50, 200]},
                         defaults={"radius": 0.99}, title="Powers of one eigenvalue",
                         caption="Move |λ| across 1: decay turns into growth.")

``plot_fn(**values)`` draws one matplotlib Figure for one combination of slider values; the
``grid`` gives, for each keyword of ``plot_fn``, the values its slider can take (numbers or
strings, in slider order). ``explore`` renders every grid point once (small PNG frames,
``dpi=80``, 64-colour palette, displayed at the size of a 100-dpi figure) and displays a single output whose MIME bundle carries three views of it:

* ``application/vnd.jupyter.widget-view+json`` — a live ipywidgets control (one
  ``SelectionSlider`` per keyword) that calls ``plot_fn`` again when a value changes. Jupyter,
  JupyterLab, VS Code and Colab render this one when a kernel is running. It works with
  ipywidgets 7.7 (Colab's) and 8, and is left out where no kernel can talk to a widget
  (plain Python), so the static views below are all there is.
* ``text/html`` — the precomputed frames and a slider written in plain HTML/JS, for the static
  website (no kernel). The book's ``_config.yml`` tells myst-nb not to render widget views,
  so the HTML is what a reader of the website sees.
* ``image/png`` — the figure at the default values: the last fallback.

Keep grids small: the number of frames is the product of the grid sizes (at most
``max_frames``), and each frame costs one call of ``plot_fn`` when the notebook runs.
Use ``build(...)`` instead of ``explore(...)`` to get the :class:`Explorer` object without
displaying it (tests, or to display it later).
"""
from __future__ import annotations

import base64
import html
import io
import itertools
import json
import numbers
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from .._validate import fail as _fail

__all__ = ["explore", "build", "Explorer"]

HTML_CLASS = "lrnn-explore"
FRAME_COLORS = 64          # palette size of the precomputed frames (the live figure is full colour)


def _label(value) -> str:
    if isinstance(value, (bool, np.bool_)):
        return str(bool(value))
    if isinstance(value, numbers.Integral):
        return str(int(value))
    if isinstance(value, numbers.Real):
        return f"{float(value):.4g}"
    return str(value)


def _python_scalar(value):
    """NumPy scalars become Python ones, so ``plot_fn`` sees plain numbers."""
    return value.item() if isinstance(value, np.generic) else value


def _validate_grid(grid) -> dict[str, tuple]:
    if not isinstance(grid, Mapping) or len(grid) == 0:
        _fail("grid", grid, "a non-empty dict {keyword of plot_fn: sequence of slider values}")
    clean = {}
    for name, values in grid.items():
        if not isinstance(name, str) or not name.isidentifier():
            _fail("grid", name, "keys that are keyword names of plot_fn (identifiers)")
        if isinstance(values, (str, bytes)) or not isinstance(values, (Sequence, np.ndarray)):
            _fail(f"grid[{name!r}]", values, "a list, tuple or 1-D array of slider values")
        if isinstance(values, np.ndarray) and values.ndim != 1:
            _fail(f"grid[{name!r}]", values, "a 1-D array of slider values")
        values = tuple(_python_scalar(v) for v in values)
        if len(values) == 0:
            _fail(f"grid[{name!r}]", values, "at least one value")
        for v in values:
            if not isinstance(v, (numbers.Number, str)) or (
                    isinstance(v, numbers.Real) and not np.isfinite(v)):
                _fail(f"grid[{name!r}]", v, "finite numbers or strings as slider values")
        labels = [_label(v) for v in values]
        if len(set(labels)) != len(labels):
            _fail(f"grid[{name!r}]", values, "distinct values (as the slider shows them)")
        clean[name] = values
    return clean


def _validate_defaults(defaults, grid: dict[str, tuple]) -> dict:
    if defaults is None:
        defaults = {}
    if not isinstance(defaults, Mapping):
        _fail("defaults", defaults, "a dict {keyword: one of its grid values} or None")
    chosen = {}
    for name in defaults:
        if name not in grid:
            _fail("defaults", name, f"keys among the grid's keywords {sorted(grid)}")
    for name, values in grid.items():
        if name in defaults:
            labels = [_label(v) for v in values]
            wanted = _label(_python_scalar(defaults[name]))
            if wanted not in labels:
                _fail(f"defaults[{name!r}]", defaults[name], f"one of the grid values {labels}")
            chosen[name] = values[labels.index(wanted)]
        else:
            chosen[name] = values[len(values) // 2]
    return chosen


def _figure_png(fig, dpi: int, colors: int | None = None) -> bytes:
    """PNG bytes of ``fig`` (which is closed). ``colors``: quantise to a palette of that many
    colours — line plots lose nothing visible and the frames shrink about threefold."""
    import matplotlib.figure
    import matplotlib.pyplot as plt

    if not isinstance(fig, matplotlib.figure.Figure):
        _fail("plot_fn", fig, "a function that returns a matplotlib Figure")
    buf = io.BytesIO()
    try:
        fig.savefig(buf, format="png", dpi=dpi, metadata={"Software": None})
    finally:
        plt.close(fig)
    if colors is None:
        return buf.getvalue()
    from PIL import Image

    image = Image.open(io.BytesIO(buf.getvalue())).convert("RGB")
    small = io.BytesIO()
    image.quantize(colors=colors, method=Image.Quantize.MEDIANCUT,
                   dither=Image.Dither.NONE).save(small, format="PNG", optimize=True)
    return small.getvalue()


class Explorer:
    """One explorable figure: the live widget, the static HTML and the fallback PNG.

    Attributes: ``grid`` (validated, ordered), ``defaults``, ``frames`` (PNG bytes, one per grid
    point in ``itertools.product`` order of the grid), ``widget`` (the ipywidgets ``VBox``,
    built on first use), ``sliders`` (name -> ``SelectionSlider``), ``image`` (the
    ``ipywidgets.Image`` that the live control redraws).
    """

    def __init__(self, plot_fn: Callable, grid, *, defaults=None, title=None, caption=None,
                 dpi: int = 80, live_dpi: int = 100, max_frames: int = 120):
        if not callable(plot_fn):
            _fail("plot_fn", plot_fn, "a callable plot_fn(**values) -> matplotlib Figure")
        for name, value in (("title", title), ("caption", caption)):
            if value is not None and not isinstance(value, str):
                _fail(name, value, "a string or None")
        for name, value in (("dpi", dpi), ("live_dpi", live_dpi), ("max_frames", max_frames)):
            if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value <= 0:
                _fail(name, value, "a positive integer")
        self.plot_fn = plot_fn
        self.grid = _validate_grid(grid)
        self.defaults = _validate_defaults(defaults, self.grid)
        n_frames = int(np.prod([len(v) for v in self.grid.values()]))
        if n_frames > max_frames:
            sizes = " × ".join(str(len(v)) for v in self.grid.values())
            _fail("grid", {k: len(v) for k, v in self.grid.items()},
                  f"at most max_frames={max_frames} grid points (got {sizes} = {n_frames}); "
                  "use fewer values per slider")
        self.title, self.caption = title, caption
        self.dpi, self.live_dpi = int(dpi), int(live_dpi)
        self.names = list(self.grid)
        self.frames = [self._render(dict(zip(self.names, point)), self.dpi, FRAME_COLORS)
                       for point in itertools.product(*self.grid.values())]
        self._live_cache: dict[tuple, bytes] = {}
        self._widget = None

    # -- rendering ---------------------------------------------------------------------------
    def _render(self, values: dict, dpi: int, colors: int | None = None) -> bytes:
        return _figure_png(self.plot_fn(**values), dpi, colors)

    def frame_index(self, values: Mapping) -> int:
        """Position in ``frames`` of the grid point ``values`` (missing keys: defaults)."""
        index = 0
        for name in self.names:
            options = self.grid[name]
            labels = [_label(v) for v in options]
            wanted = _label(_python_scalar(values.get(name, self.defaults[name])))
            if wanted not in labels:
                _fail(f"values[{name!r}]", values.get(name), f"one of the grid values {labels}")
            index = index * len(options) + labels.index(wanted)
        return index

    @property
    def default_png(self) -> bytes:
        return self.frames[self.frame_index(self.defaults)]

    # -- live widget -------------------------------------------------------------------------
    @property
    def widget(self):
        if self._widget is None:
            self._widget = self._build_widget()
        return self._widget

    @property
    def sliders(self) -> dict:
        return self.widget._lrnn_sliders

    @property
    def image(self):
        return self.widget._lrnn_image

    def _build_widget(self):
        import ipywidgets as w

        sliders = {}
        for name, values in self.grid.items():
            sliders[name] = w.SelectionSlider(
                options=[(_label(v), v) for v in values], value=self.defaults[name],
                description=name, continuous_update=False,
                style={"description_width": "initial"}, layout=w.Layout(width="28em"))
        image = w.Image(value=self.default_png, format="png")
        children = []
        if self.title:
            children.append(w.HTML(f"<b>{html.escape(self.title)}</b>"))
        children += list(sliders.values()) + [image]
        if self.caption:
            children.append(w.HTML(f"<em>{html.escape(self.caption)}</em>"))

        def redraw(_change=None):
            values = {name: s.value for name, s in sliders.items()}
            key = tuple(_label(values[n]) for n in self.names)
            if key not in self._live_cache:
                self._live_cache[key] = self._render(values, self.live_dpi)
            image.value = self._live_cache[key]

        for s in sliders.values():
            s.observe(redraw, names="value")
        box = w.VBox(children, layout=w.Layout(align_items="flex-start"))
        box.add_class(HTML_CLASS)
        box._lrnn_sliders, box._lrnn_image, box._lrnn_redraw = sliders, image, redraw
        return box

    # -- static HTML ---------------------------------------------------------------------------
    def html(self) -> str:
        """Self-contained HTML: every frame (base64 PNG) and one range input per keyword."""
        labels = [[_label(v) for v in values] for values in self.grid.values()]
        start = [labels[i].index(_label(self.defaults[n])) for i, n in enumerate(self.names)]
        data = {"names": self.names, "labels": labels, "start": start,
                "frames": [base64.b64encode(f).decode("ascii") for f in self.frames]}
        payload = json.dumps(data, separators=(",", ":")).replace("</", "<\\/")
        alt = html.escape(self.title or "figure", quote=True)
        controls = []
        for i, name in enumerate(self.names):
            n = len(labels[i])
            controls.append(
                f'<label style="display:flex;gap:.6em;align-items:center;margin:.15em 0">'
                f'<span style="min-width:7em;font-family:monospace">{html.escape(name)}</span>'
                f'<input type="range" min="0" max="{n - 1}" step="1" value="{start[i]}" '
                f'data-param="{i}" aria-label="{html.escape(name, quote=True)}"'
                f'{" disabled" if n == 1 else ""} style="width:16em">'
                f'<output style="font-family:monospace">{html.escape(labels[i][start[i]])}'
                f'</output></label>')
        title = (f'<div class="{HTML_CLASS}-title" style="font-weight:bold">'
                 f'{html.escape(self.title)}</div>') if self.title else ""
        caption = (f'<div class="{HTML_CLASS}-caption" style="font-style:italic">'
                   f'{html.escape(self.caption)}</div>') if self.caption else ""
        default_src = base64.b64encode(self.default_png).decode("ascii")
        # shown at the size a 100-dpi inline figure would have, like the page's other figures
        width = round(int.from_bytes(self.default_png[16:20], "big") * 100 / self.dpi)
        return (
            f'<div class="{HTML_CLASS}" data-frames="{len(self.frames)}">{title}'
            f'<div class="{HTML_CLASS}-controls">{"".join(controls)}</div>'
            f'<img class="{HTML_CLASS}-frame" alt="{alt}" style="width:{width}px;max-width:100%" '
            f'src="data:image/png;base64,{default_src}">{caption}'
            f'<script type="application/json" class="{HTML_CLASS}-data">{payload}</script>'
            f"<script>{_JS}</script></div>")

    # -- display -------------------------------------------------------------------------------
    def _repr_mimebundle_(self, include=None, exclude=None):
        try:
            bundle = widget_view(self.widget) if has_widget_comm() else {}
        except ImportError:   # no ipywidgets (the library alone): the static views still work
            bundle = {}
        bundle["text/html"] = self.html()
        bundle["image/png"] = base64.b64encode(self.default_png).decode("ascii")
        bundle["text/plain"] = (f"<lrnn.course.widgets.Explorer {self.title or ''!s}: "
                                f"{len(self.frames)} frames over {', '.join(self.names)}>")
        return bundle


# The static slider. It finds its own container through document.currentScript, so several
# explorers on one page never clash. `?lrnn-selftest` in the page URL moves every slider once
# and records the result on the container (used by scripts/screenshots.py).
_JS = r"""(function(){
var root=document.currentScript.parentElement;
var data=JSON.parse(root.querySelector('script.lrnn-explore-data').textContent);
var img=root.querySelector('img.lrnn-explore-frame');
var inputs=root.querySelectorAll('input[data-param]');
function show(){var k=0;for(var i=0;i<inputs.length;i++){var p=+inputs[i].dataset.param;
var j=+inputs[i].value;k=k*data.labels[p].length+j;
inputs[i].parentElement.querySelector('output').textContent=data.labels[p][j];}
img.src='data:image/png;base64,'+data.frames[k];root.dataset.frame=k;}
for(var i=0;i<inputs.length;i++){inputs[i].addEventListener('input',show);}
show();
if(/[?&]lrnn-selftest/.test(window.location.search)){
var before=img.src,moved=false;
for(var i=0;i<inputs.length&&!moved;i++){var s=inputs[i];if(+s.max>0){
s.value=(+s.value+1)%(+s.max+1);s.dispatchEvent(new Event('input'));moved=true;}}
root.dataset.selftest=!moved?'single-frame':(img.src!==before?'pass':'fail');}
})();"""


WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def has_widget_comm(shell=None) -> bool:
    """True in a Jupyter kernel (a front end can show a live widget); False in plain Python or
    IPython in a terminal, where ipywidgets 7 has no comm and 8 only a dummy one."""
    if shell is None:
        try:
            from IPython import get_ipython
        except ImportError:
            return False
        shell = get_ipython()
    return getattr(shell, "kernel", None) is not None


def widget_view(widget) -> dict:
    """The widget-view part of a widget's MIME bundle, on ipywidgets 8 (``_repr_mimebundle_``)
    and 7 (which only has ``_ipython_display_``; its view data is written here the same way)."""
    if getattr(widget, "_view_name", None) is None:
        return {}
    if hasattr(widget, "_repr_mimebundle_"):
        return {k: v for k, v in widget._repr_mimebundle_().items() if k == WIDGET_VIEW}
    return {WIDGET_VIEW: {"version_major": 2, "version_minor": 0, "model_id": widget.model_id}}


def build(plot_fn: Callable, grid: Mapping[str, Sequence], *, defaults=None, title=None,
          caption=None, dpi: int = 80, live_dpi: int = 100, max_frames: int = 120) -> Explorer:
    """Render every grid point of ``plot_fn`` and return the :class:`Explorer` (not displayed).

    ``defaults`` picks the starting value of each keyword (default: the middle of its grid).
    Raises ``ValueError`` naming the argument for an empty or malformed grid, a default that
    is not a grid value, more than ``max_frames`` grid points, or a ``plot_fn`` that does not
    return a matplotlib Figure."""
    return Explorer(plot_fn, grid, defaults=defaults, title=title, caption=caption, dpi=dpi,
                    live_dpi=live_dpi, max_frames=max_frames)


def explore(plot_fn: Callable, grid: Mapping[str, Sequence], *, defaults=None, title=None,
            caption=None, dpi: int = 80, live_dpi: int = 100, max_frames: int = 120) -> None:
    """Display an explorable figure (live widget in Jupyter/Colab, JS slider on the website).

    See the module docstring for an example. Arguments as in :func:`build`."""
    from IPython.display import display

    display(build(plot_fn, grid, defaults=defaults, title=title, caption=caption, dpi=dpi,
                  live_dpi=live_dpi, max_frames=max_frames))
