"""Pictures of graphs (issue 17): ``Graph`` and ``Lowered`` as DOT text, and rendered
by Graphviz's ``dot`` to SVG, PNG and PDF files and to Jupyter's ``_repr_svg_``. Kernels
are clusters named as the profiler names the steps, devices are fill colours and
transfers red edges, loop bodies clusters; without ``dot`` rendering raises
``GraphvizNotFound`` and Jupyter gets None. Tests that run ``dot`` are skipped, saying
so, where Graphviz is not installed."""

import re
import shutil
import warnings
import xml.etree.ElementTree as ET

import gpu
import numpy as np
import pytest

import tracejit as tj
from tracejit import lax
from tracejit.backends import cpu as cpu_backend
from tracejit.errors import GraphvizNotFound, InvalidArgument, TracejitError

needs_dot = pytest.mark.skipif(
    shutil.which("dot") is None,
    reason="Graphviz's dot is not installed (apt install graphviz; CI installs it)")
SVG = "{http://www.w3.org/2000/svg}"
RNG = np.random.default_rng(0)


def mlp_loss(params, x, y):
    W1, b1, W2, b2 = params
    h = np.tanh(x @ W1 + b1)
    return np.mean((h @ W2 + b2 - y) ** 2)


PARAMS = [RNG.standard_normal(s).astype(np.float32) for s in [(64, 128), (128,), (128, 16), (16,)]]
X = RNG.standard_normal((256, 64)).astype(np.float32)
Y = RNG.standard_normal((256, 16)).astype(np.float32)


def parse_svg(text: str) -> ET.Element:
    root = ET.fromstring(text)
    assert root.tag == f"{SVG}svg"
    return root


def clusters(root: ET.Element) -> dict[str, str]:
    """Each cluster's DOT name and its label's text, from the SVG Graphviz wrote."""
    found = {}
    for g in root.iter(f"{SVG}g"):
        if g.get("class") == "cluster":
            found[g.find(f"{SVG}title").text] = " ".join(t.text for t in g.iter(f"{SVG}text"))
    return found


def no_graphviz(monkeypatch, tmp_path):
    """A PATH with no ``dot`` on it."""
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert shutil.which("dot") is None


@pytest.fixture
def mlp_grad(monkeypatch):
    monkeypatch.setattr(tj.config, "min_kernel_size", 4096)  # the default: 3 kernels
    # The picture is the first runner's; the later one (its small steps compiled too, see
    # backends/cpu) takes over as soon as its kernels exist, at once where an earlier test
    # of the session compiled them: the profile would name its steps. Keep the first.
    monkeypatch.setattr(cpu_backend, "_later", lambda graph, faster: None)
    return tj.jit(tj.grad(mlp_loss))


@needs_dot
def test_kernels_are_clusters_named_as_the_profilers_steps(mlp_grad, tmp_path):
    lowered = mlp_grad.lower(PARAMS, X, Y)
    root = parse_svg(lowered.render(tmp_path / "grad.svg").read_text())
    kernels = {name: text for name, text in clusters(root).items()
               if name.startswith("cluster_step")}
    assert len(kernels) == 3  # add+tanh; the output's error and its sum; tanh's gradient
    titles = {text.split(":")[0] for text in kernels.values()}
    with tj.profile() as p:
        mlp_grad(PARAMS, X, Y)
    ran = {s.name for s in p.steps}
    assert titles == {name for name in ran if name.startswith("kernel")}
    assert any(re.fullmatch(r"kernel\d+: add, tanh test_pictures\.py:\d+", text)
               for text in kernels.values())
    dot = lowered.to_dot()  # library steps: a double border and the step's name
    assert {f"lib{k}" for k in re.findall(r'label="lib(\d+): ', dot)} == (
        {name for name in ran if name.startswith("lib")})
    assert "peripheries=2" in dot and 'label="library step"' in dot


def test_the_reference_backends_steps_are_its_nodes():
    lowered = tj.jit(lambda x: np.tanh(x) * 2, backend="reference").lower(np.ones(3))
    dot = lowered.to_dot()
    assert "cluster_step" not in dot
    assert re.findall(r'label="(node\d+): (\w+)', dot) == [
        ("node0", "tanh"), ("node1", "constant"), ("node2", "multiply")]


def test_dask_graphs_are_drawn_without_kernels():
    da = pytest.importorskip("dask.array")
    x = da.ones((8, 4), chunks=(4, 4))
    lowered = tj.jit(lambda x: np.exp(x).sum(axis=0)).lower(x)
    dot = lowered.to_dot()
    assert "cluster_step" not in dot and "exp" in dot and "sum" in dot


@pytest.fixture
def cp(monkeypatch):
    with gpu.cupy(monkeypatch) as module:
        yield module


def partly_on_the_gpu(x, b, s):
    return np.exp(x).sum(axis=1) * s + (b * b).astype(np.float32)  # uint8 stays on the CPU


def lower_on_the_gpu():
    x, b = RNG.standard_normal((64, 33)).astype(np.float32), np.arange(64, dtype=np.uint8)
    with tj.device("cuda"), warnings.catch_warnings():
        warnings.simplefilter("ignore", tj.errors.PlacementWarning)
        return tj.jit(partly_on_the_gpu).lower(x, b, 2.0)


def test_devices_are_colours_and_transfers_red_edges(cp):
    lowered = lower_on_the_gpu()
    dot = lowered.optimized_graph.to_dot()
    fills = dict(re.findall(r'label="(\w+)\\n[^"]*", style="filled", fillcolor="(#\w+)"', dot))
    assert fills["x"] == fills["multiply"] != fills["exp"]  # cpu, cpu, cuda:0
    assert fills["s"] not in (fills["x"], fills["exp"])  # a host scalar
    for device in ("cpu", "cuda:0", "host scalar"):
        assert f'label="{device}", style=filled' in dot  # the legend
    moves = re.findall(r'color="#cc0000".*label="cpu to cuda:0\\n([^"]*)"', dot)
    assert moves == ["8.2 KiB", "256 B"]  # x (64*33 float32) and the uint8 part's result
    assert "label=\"transfer\\n" not in dot  # drawn as edges, not boxes
    steps = lowered.to_dot()  # the CUDA backend's steps: transfers are library steps
    assert len(re.findall(r"subgraph cluster_step", steps)) == 2
    assert re.findall(r'label="(lib\d+): cpu to cuda:0', steps) == ["lib0", "lib3"]


@needs_dot
def test_a_placed_graph_renders_with_its_legend(cp, tmp_path):
    root = parse_svg(lower_on_the_gpu().render(tmp_path / "gpu.svg").read_text())
    assert "cluster_legend" in clusters(root)
    texts = {t.text for t in root.iter(f"{SVG}text")}
    assert {"cuda:0", "cpu", "host scalar", "transfer"} <= texts
    red = [p for p in root.iter(f"{SVG}path") if p.get("stroke") == "#cc0000"]
    assert len(red) == 3  # two transfers and the legend's


def rnn_loss(W, h0, xs):
    def step(h, x):
        h = np.tanh(h @ W + x)
        return h, (h ** 2).sum()

    _, energies = lax.scan(step, h0, xs)
    return energies.sum()


RNN = (RNG.standard_normal((4, 4)) * 0.5, np.zeros(4), RNG.standard_normal((100, 4)))


def test_loop_bodies_are_clusters_in_the_text():
    dot = tj.jit(tj.grad(rnn_loss)).lower(*RNN).to_dot()
    assert len(re.findall(r'label="scan body"', dot)) == 2  # forward and reverse scans
    assert len(re.findall(r"lhead=cluster_\w+_body, style=dashed", dot)) == 2


@needs_dot
def test_loop_bodies_are_clusters_in_the_picture(tmp_path):
    graph = tj.jit(rnn_loss).lower(*RNN).optimized_graph
    root = parse_svg(graph.render(tmp_path / "scan.svg").read_text())
    assert [text for name, text in clusters(root).items() if name.endswith("_body")] == [
        "scan body"]


@needs_dot
@pytest.mark.parametrize("name, magic", [("f.svg", b"<?xml"), ("f.png", b"\x89PNG"),
                                          ("f.pdf", b"%PDF")])
def test_render_writes_the_format_its_suffix_names(tmp_path, name, magic):
    graph = tj.jit(lambda x: np.tanh(x) * 2).lower(np.ones(3)).graph
    path = graph.render(str(tmp_path / name))
    assert path == tmp_path / name and path.read_bytes().startswith(magic)


@needs_dot
def test_format_overrides_the_suffix_and_unknown_formats_are_refused(tmp_path):
    lowered = tj.jit(lambda x: np.tanh(x) * 2).lower(np.ones(3))
    assert lowered.render(tmp_path / "f", format="PNG").read_bytes().startswith(b"\x89PNG")
    with pytest.raises(InvalidArgument, match=r"\.svg, \.png, \.pdf"):
        lowered.render(tmp_path / "f.gif")


@needs_dot
def test_jupyter_shows_svg():
    lowered = tj.jit(lambda x: np.tanh(x) * 2).lower(np.ones(3))
    for shown in (lowered, lowered.graph):
        assert "tanh" in {t.text for t in parse_svg(shown._repr_svg_()).iter(f"{SVG}text")}


def test_jupyter_falls_back_to_text_without_graphviz(monkeypatch, tmp_path):
    lowered = tj.jit(lambda x: np.tanh(x) * 2).lower(np.ones(3))
    no_graphviz(monkeypatch, tmp_path)
    assert lowered._repr_svg_() is None and lowered.graph._repr_svg_() is None
    shown = []  # IPython's pretty printer, as a graph's _repr_pretty_ uses it
    lowered.graph._repr_pretty_(type("Printer", (), {"text": lambda self, t: shown.append(t)})(),
                                False)
    assert shown == [lowered.ir]


def test_render_without_graphviz_says_how_to_install_it(monkeypatch, tmp_path):
    lowered = tj.jit(lambda x: np.tanh(x) * 2).lower(np.ones(3))
    no_graphviz(monkeypatch, tmp_path)
    for drawn in (lowered, lowered.graph):
        with pytest.raises(GraphvizNotFound) as err:
            drawn.render(tmp_path / "f.svg")  # <- here
        assert isinstance(err.value, TracejitError) and isinstance(err.value, RuntimeError)
        text = str(err.value)
        for words in ("graphviz", "apt install", "dnf install", "brew install", "conda install",
                      "to_dot()", "test_pictures.py", "# <- here"):
            assert words in text
        assert not (tmp_path / "f.svg").exists()
    assert lowered.to_dot().startswith("digraph")  # the text needs no Graphviz


def unrolled(x, W):
    for _ in range(700):  # a plain loop: the traced graph has a node per operation
        x = np.sin(x @ W) * 0.5
    return x


@needs_dot
def test_a_graph_of_thousands_of_nodes_renders(tmp_path):
    graph = tj.jit(unrolled).lower(np.ones(3), RNG.standard_normal((3, 3))).graph
    assert len(graph.nodes) > 2000
    dot = graph.to_dot()  # W is read at every step: drawn again beside its readers
    assert dot.count("style=\"dashed\"") > 600 and "value drawn again" in dot
    root = parse_svg(graph.render(tmp_path / "big.svg").read_text())
    assert sum(g.get("class") == "node" for g in root.iter(f"{SVG}g")) > 2000


def test_a_failing_dot_is_reported_and_jupyter_still_gets_text(monkeypatch, tmp_path):
    fake = tmp_path / "bin" / "dot"  # a dot that fails as a broken install would
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\necho 'dot: broken install' >&2\nexit 3\n")
    fake.chmod(0o755)
    lowered = tj.jit(lambda x: np.tanh(x) * 2).lower(np.ones(3))
    monkeypatch.setenv("PATH", str(fake.parent))
    with pytest.raises(tj.errors.IRError, match=r"exit status 3\): dot: broken install"):
        lowered.render(tmp_path / "f.svg")
    assert lowered._repr_svg_() is None
