"""lrnn.course.widgets: the live widget redraws, the static HTML has one frame per grid point, bad
grids are refused with a ValueError that names the argument."""
import base64
import json
import re

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from lrnn.course import widgets  # noqa: E402

CALLS = []


def plot(radius, length=20, style="line"):
    CALLS.append((radius, length, style))
    fig, ax = plt.subplots(figsize=(2, 1.5))
    t = np.arange(length)
    ax.plot(t, radius ** t, "-" if style == "line" else "o")
    ax.set(title=f"r={radius}", xlabel="t", ylabel="r^t")
    return fig


GRID = {"radius": [0.5, 0.9, 1.1], "length": [10, 20], "style": ["line", "dots"]}


@pytest.fixture(scope="module")
def explorer():
    return widgets.build(plot, GRID, defaults={"radius": 0.9}, title="Powers", caption="A <b>caption</b>")


def _payload(html):
    m = re.search(r'<script type="application/json" class="lrnn-explore-data">(.*?)</script>', html, re.S)
    return json.loads(m.group(1).replace("<\\/", "</"))


def test_one_frame_per_grid_point(explorer):
    html = explorer.html()
    data = _payload(html)
    assert len(explorer.frames) == 3 * 2 * 2
    assert len(data["frames"]) == 12
    assert html.count('data-frames="12"') == 1
    # every frame is a distinct PNG
    pngs = [base64.b64decode(f) for f in data["frames"]]
    assert all(p.startswith(b"\x89PNG") for p in pngs)
    assert len(set(pngs)) == 12
    # one range input per keyword, with as many stops as grid values
    ranges = re.findall(r'<input type="range" min="0" max="(\d+)"', html)
    assert ranges == ["2", "1", "1"]
    assert data["labels"] == [["0.5", "0.9", "1.1"], ["10", "20"], ["line", "dots"]]


def test_frame_order_and_defaults(explorer):
    # defaults: radius given, the others take the middle of their grid
    assert explorer.defaults == {"radius": 0.9, "length": 20, "style": "dots"}
    data = _payload(explorer.html())
    assert data["start"] == [1, 1, 1]
    # frame k is plot(**point_k) in itertools.product order
    index = explorer.frame_index({"radius": 1.1, "length": 10, "style": "dots"})
    assert index == 2 * 4 + 0 * 2 + 1
    fresh = widgets._figure_png(plot(1.1, 10, "dots"), explorer.dpi, widgets.FRAME_COLORS)
    assert explorer.frames[index] == fresh
    assert explorer.default_png == explorer.frames[explorer.frame_index(explorer.defaults)]


def test_live_widget_redraws_on_change(explorer):
    image = explorer.image
    first = bytes(image.value)
    assert first == explorer.default_png
    CALLS.clear()
    explorer.sliders["radius"].value = 1.1
    assert CALLS == [(1.1, 20, "dots")]
    assert bytes(image.value) != first and bytes(image.value).startswith(b"\x89PNG")
    after_radius = bytes(image.value)
    explorer.sliders["style"].value = "line"
    assert bytes(image.value) != after_radius
    explorer.sliders["radius"].value = 0.9
    explorer.sliders["style"].value = "dots"
    # back at the defaults, redrawn live (full colour, live_dpi): the same picture, larger
    assert bytes(image.value) != after_radius
    assert len(bytes(image.value)) > len(first)
    from PIL import Image
    import io
    live, static = Image.open(io.BytesIO(bytes(image.value))), Image.open(io.BytesIO(first))
    assert live.size[0] > static.size[0] and static.mode == "P"


class FakeKernelShell:
    kernel = object()


def test_widget_comm_only_in_a_kernel():
    assert widgets.has_widget_comm(FakeKernelShell())
    assert not widgets.has_widget_comm(object())
    assert not widgets.has_widget_comm()      # pytest: plain Python, no kernel


def test_mime_bundle_without_a_kernel_is_static(explorer):
    bundle = explorer._repr_mimebundle_()
    assert widgets.WIDGET_VIEW not in bundle
    assert bundle["text/html"] == explorer.html()
    assert base64.b64decode(bundle["image/png"]) == explorer.default_png


def test_widget_view_on_ipywidgets_7_and_8(explorer):
    view = widgets.widget_view(explorer.widget)[widgets.WIDGET_VIEW]
    assert view["model_id"] == explorer.widget.model_id and view["version_major"] == 2

    class Widget7:          # ipywidgets 7: no _repr_mimebundle_, only _ipython_display_
        _view_name, model_id = "VBoxView", "abc"
    assert widgets.widget_view(Widget7()) == {
        widgets.WIDGET_VIEW: {"version_major": 2, "version_minor": 0, "model_id": "abc"}}


def test_mime_bundle_has_widget_html_and_png(explorer, monkeypatch):
    monkeypatch.setattr(widgets, "has_widget_comm", lambda: True)   # as in a Jupyter kernel
    bundle = explorer._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert bundle["application/vnd.jupyter.widget-view+json"]["model_id"] == explorer.widget.model_id
    assert bundle["text/html"] == explorer.html()
    assert base64.b64decode(bundle["image/png"]) == explorer.default_png
    assert "12 frames" in bundle["text/plain"]


def test_html_is_escaped_and_self_contained(explorer):
    html = explorer.html()
    assert "A &lt;b&gt;caption&lt;/b&gt;" in html
    assert "document.currentScript" in html
    assert "http://" not in html and "https://" not in html
    # frames at dpi=80 are shown at the width of a 100-dpi figure: 2 inches -> 200 px
    assert explorer.dpi == 80 and 'style="width:200px;max-width:100%"' in html


@pytest.mark.parametrize("grid, name", [
    ({}, "grid"),
    ([("radius", [1.0])], "grid"),
    ({"radius": []}, "grid['radius']"),
    ({"radius": 0.5}, "grid['radius']"),
    ({"radius": "abc"}, "grid['radius']"),
    ({"radius": np.ones((2, 2))}, "grid['radius']"),
    ({"radius": [0.5, float("nan")]}, "grid['radius']"),
    ({"radius": [0.5, 0.5]}, "grid['radius']"),
    ({"not an identifier": [1]}, "grid"),
    ({"radius": list(np.linspace(0, 1, 200))}, "grid"),
])
def test_bad_grid_raises_naming_the_argument(grid, name):
    with pytest.raises(ValueError, match=re.escape(f"`{name}`")):
        widgets.build(plot, grid)


def test_bad_defaults_and_plot_fn():
    with pytest.raises(ValueError, match="`defaults\\['radius'\\]`"):
        widgets.build(plot, {"radius": [0.5, 0.9]}, defaults={"radius": 0.7})
    with pytest.raises(ValueError, match="`defaults`"):
        widgets.build(plot, {"radius": [0.5, 0.9]}, defaults={"speed": 1})
    with pytest.raises(ValueError, match="`plot_fn`"):
        widgets.build(lambda radius: None, {"radius": [0.5]})
    with pytest.raises(ValueError, match="`plot_fn`"):
        widgets.build("plot", {"radius": [0.5]})
    with pytest.raises(ValueError, match="`title`"):
        widgets.build(plot, {"radius": [0.5]}, title=3)


def test_numpy_grid_values_reach_plot_fn_as_python_scalars():
    seen = []

    def f(k):
        seen.append(type(k))
        fig = plt.figure(figsize=(1, 1))
        return fig

    e = widgets.build(f, {"k": np.arange(3)})
    assert len(e.frames) == 3 and seen == [int, int, int]
    assert e.defaults == {"k": 1}


def test_figures_are_closed():
    before = len(plt.get_fignums())
    widgets.build(plot, {"radius": [0.5, 0.9]})
    assert len(plt.get_fignums()) == before
