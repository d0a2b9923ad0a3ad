"""The profiler's timeline: ``export_trace`` writes Trace Event Format JSON (validated here
against a JSON schema of the format) whose events agree with the table; calls on their
threads with their steps nested in them, compiles, background compiles and the switch to
their kernels, transfers on the (emulated) GPU; the HTML table and the SVG picture."""

import json
import re
import threading
import xml.etree.ElementTree as ET
from html.parser import HTMLParser

import gpu
import jsonschema
import numpy as np
import pytest

import tracejit as tj
from tracejit.errors import InvalidArgument

X = np.linspace(-1, 1, 8, dtype=np.float32)
WAIT = 120  # seconds a background compile may take (a cold worker imports Numba)
STEP_CATS = ["kernel", "library", "transfer", "loop", "op"]

_NAMED = {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}}
SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "required": ["traceEvents", "displayTimeUnit"],
    "properties": {
        "displayTimeUnit": {"enum": ["ms", "ns"]},
        "otherData": {"type": "object"},
        "traceEvents": {"type": "array", "items": {"oneOf": [
            {"$ref": "#/$defs/complete"}, {"$ref": "#/$defs/instant"},
            {"$ref": "#/$defs/metadata"}]}},
    },
    "$defs": {
        "id": {"type": "integer", "minimum": 0},
        "complete": {
            "type": "object",
            "required": ["ph", "name", "cat", "ts", "dur", "pid", "tid", "args"],
            "properties": {
                "ph": {"const": "X"}, "name": {"type": "string", "minLength": 1},
                "cat": {"enum": ["call", "compile", *STEP_CATS]},
                "ts": {"type": "number", "minimum": 0}, "dur": {"type": "number", "minimum": 0},
                "pid": {"$ref": "#/$defs/id"}, "tid": {"$ref": "#/$defs/id"},
                "args": {"type": "object", "required": ["function", "signature"]},
            },
            "allOf": [
                {"if": {"properties": {"cat": {"enum": STEP_CATS}}},
                 "then": {"properties": {"args": {
                     "required": ["step", "ops", "where", "bytes"],
                     "properties": {"ops": {"type": "string"},
                                    "where": {"type": "string", "pattern": r"^.+:\d+$"},
                                    "bytes": {"type": "integer", "minimum": 0}}}}}},
                {"if": {"properties": {"cat": {"const": "call"}}},
                 "then": {"properties": {"args": {"required": ["where"]}}}},
            ],
        },
        "instant": {
            "type": "object",
            "required": ["ph", "name", "cat", "ts", "pid", "tid", "s"],
            "properties": {
                "ph": {"const": "i"}, "name": {"type": "string", "minLength": 1},
                "cat": {"const": "switch"}, "ts": {"type": "number", "minimum": 0},
                "s": {"enum": ["g", "p", "t"]},
                "pid": {"$ref": "#/$defs/id"}, "tid": {"$ref": "#/$defs/id"},
            },
        },
        "metadata": {
            "type": "object",
            "required": ["ph", "name", "pid", "tid", "args"],
            "properties": {
                "ph": {"const": "M"},
                "name": {"enum": ["process_name", "thread_name", "thread_sort_index"]},
                "pid": {"$ref": "#/$defs/id"}, "tid": {"$ref": "#/$defs/id"},
            },
            "allOf": [
                {"if": {"properties": {"name": {"enum": ["process_name", "thread_name"]}}},
                 "then": {"properties": {"args": _NAMED}}},
                {"if": {"properties": {"name": {"const": "thread_sort_index"}}},
                 "then": {"properties": {"args": {
                     "required": ["sort_index"],
                     "properties": {"sort_index": {"type": "integer"}}}}}},
            ],
        },
    },
}


def chain(x, y):
    return np.tanh(x * y + 0.5) * np.exp(-x * x)


def double(x):
    return x * 2


def call(f, *args):
    return f(*args)


CALL_LINE = call.__code__.co_firstlineno + 1


@pytest.fixture(params=["reference", "cpu"])
def backend(request, tmp_path, monkeypatch):
    monkeypatch.setenv("TRACEJIT_CACHE_DIR", str(tmp_path / "cache"))
    return request.param


def exported(p: tj.Profile, tmp_path) -> dict:
    """The trace ``p`` exports, checked against the schema (and the same as trace_events)."""
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    path = p.export_trace(tmp_path / "trace.json")
    assert path == tmp_path / "trace.json"
    data = json.loads(path.read_text())
    jsonschema.validate(data, SCHEMA)
    assert data == json.loads(json.dumps(p.trace_events()))
    return data


def spans(data: dict, *cats: str) -> list[dict]:
    return [e for e in data["traceEvents"] if e["ph"] == "X" and (not cats or e["cat"] in cats)]


def inside(inner: dict, outer: dict) -> bool:
    eps = 1e-3  # µs: the events' times are rounded to nanoseconds
    return (inner["tid"] == outer["tid"] and outer["ts"] - eps <= inner["ts"]
            and inner["ts"] + inner["dur"] <= outer["ts"] + outer["dur"] + eps)


def steps_by_call(data: dict) -> dict[int, list[dict]]:
    """Each call span's steps (by the call's index in the events): every step lies in
    exactly one call, on its thread."""
    calls = spans(data, "call")
    found: dict[int, list[dict]] = {i: [] for i in range(len(calls))}
    for step in spans(data, *STEP_CATS):
        (owner,) = [i for i, c in enumerate(calls) if inside(step, c)]
        found[owner].append(step)
    return found


def test_trace_agrees_with_the_table(backend, tmp_path):
    f = tj.jit(chain, backend=backend)
    g = tj.jit(double, backend=backend)
    f(X, X)  # compiled before the block
    with tj.profile() as p:
        for _ in range(3):
            call(f, X, X)
        for _ in range(2):
            call(g, X)  # compiled inside the block
    data = exported(p, tmp_path)
    calls = spans(data, "call")
    assert [c["name"] for c in calls] == ["chain"] * 3 + ["double"] * 2
    for c in calls:
        assert c["args"]["where"] == f"test_profile_trace.py:{CALL_LINE}"
        assert c["args"]["runs"] == "compiled code"
    by_name = {s.name: s for s in p.functions}
    assert calls[0]["args"]["signature"] == by_name["chain"].signature
    assert sum(c["dur"] for c in calls) == pytest.approx(1e6 * p.seconds, abs=1e-2)
    nested = steps_by_call(data)
    for i, c in enumerate(calls):  # one span per step the runner reported, in order
        names = [s["name"] for s in nested[i]]
        want = sorted((s for s in p.steps if s.function == c["name"]),
                      key=lambda s: int(re.sub(r"\D", "", s.name)))
        assert names == [f"{s.function}/{s.name}" for s in want]
    for s in p.steps:
        mine = [e for e in spans(data, *STEP_CATS) if e["name"] == f"{s.function}/{s.name}"]
        assert len(mine) == s.calls
        assert {(e["args"]["ops"], e["args"]["where"], e["args"]["bytes"]) for e in mine} == {
            (s.ops, s.where, s.nbytes)}
        assert sum(e["dur"] for e in mine) == pytest.approx(1e6 * s.seconds, abs=1e-2)
    tid = calls[0]["tid"]
    (compile_double,) = [e for e in spans(data, "compile") if e["name"] == "compile double"
                         and len([c for c in spans(data, "compile") if inside(c, e)]) > 2]
    phases = [e for e in spans(data, "compile") if inside(e, compile_double)
              and e is not compile_double]
    assert [e["name"] for e in phases] == ["tracing", "passes", "code generation", "first call"]
    assert compile_double["tid"] == tid
    assert compile_double["ts"] + compile_double["dur"] <= calls[3]["ts"]
    assert not [e for e in spans(data, "compile") if e["name"] == "tracing"
                and e["ts"] < compile_double["ts"]]  # chain was compiled before the block
    names = {e["tid"]: e["args"]["name"] for e in data["traceEvents"]
             if e["name"] == "thread_name"}
    assert names == {tid: threading.current_thread().name}


def test_calls_from_two_threads_land_on_two_tracks(tmp_path):
    f = tj.jit(chain, backend="reference")
    f(X, X)
    barrier = threading.Barrier(2)

    def work():
        barrier.wait()
        for _ in range(2):
            f(X, X)

    threads = [threading.Thread(target=work, name=f"worker-{i}") for i in range(2)]
    with tj.profile() as p:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    data = exported(p, tmp_path)
    calls = spans(data, "call")
    assert len(calls) == 4 == p.functions[0].calls
    by_tid = {t.native_id: t.name for t in threads}
    assert {c["tid"] for c in calls} == set(by_tid)
    for tid in by_tid:
        assert len([c for c in calls if c["tid"] == tid]) == 2
    names = {e["tid"]: e["args"]["name"] for e in data["traceEvents"]
             if e["name"] == "thread_name"}
    assert names == by_tid
    for steps in steps_by_call(data).values():
        assert len(steps) == len(p.steps)  # every call's steps, on its own thread


def _tiers_step(x, w):
    h = np.tanh(x @ w + 0.5)
    return h / h.sum(axis=1, keepdims=True)


def test_background_compile_and_switch(tmp_path, monkeypatch):
    from tracejit.backends.cpu import kernels

    monkeypatch.setattr(kernels, "_compiled", {})  # something to compile in the background
    monkeypatch.setenv("TRACEJIT_CACHE_DIR", str(tmp_path / "cache"))
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((300, 3)), rng.standard_normal((3, 40))
    f = tj.jit(_tiers_step, compile="background")
    with tj.profile() as p:
        f(x, w)  # on the interpreter
        assert f.wait_compiled(WAIT)
        f(x, w)  # on the compiled kernels
    data = exported(p, tmp_path)
    calls = spans(data, "call")
    assert [c["args"]["runs"] for c in calls] == ["interpreter", "compiled code"]
    nested = steps_by_call(data)
    assert {s["cat"] for s in nested[0]} == {"op"}
    assert {s["cat"] for s in nested[1]} <= {"kernel", "library"} and nested[1]
    # the table counts the interpreter's steps and the kernels apart, once each
    assert sorted(s.name for s in p.steps) == sorted(
        e["name"].split("/")[1] for e in nested[0] + nested[1])
    assert {s.calls for s in p.steps} == {1}
    background = [e for e in spans(data, "compile") if e["name"].endswith("in the background")]
    switches = [e for e in data["traceEvents"] if e["ph"] == "i"]
    assert background and len(switches) == len(background)
    assert switches[0]["name"] == "_tiers_step runs compiled kernels"
    for span, switch in zip(background, switches, strict=True):
        assert span["tid"] == switch["tid"] != calls[0]["tid"]
        assert switch["ts"] == pytest.approx(span["ts"] + span["dur"], abs=1e-2)
        assert switch["ts"] <= calls[1]["ts"]
    names = {e["tid"]: e["args"]["name"] for e in data["traceEvents"]
             if e["name"] == "thread_name"}
    assert names[background[0]["tid"]] == "background compiles"
    # the compile on the caller's thread: tracing, passes, code generation, first call
    phases = [e["name"] for e in spans(data, "compile") if e["tid"] == calls[0]["tid"]]
    assert phases[:5] == ["compile _tiers_step", "tracing", "passes", "code generation",
                          "first call"]


@pytest.fixture
def cp(monkeypatch):
    with gpu.cupy(monkeypatch) as module:
        yield module


def test_transfers_on_the_gpu_carry_their_bytes(cp, tmp_path):
    f = tj.jit(lambda x: np.exp(x).sum())
    with tj.device("cuda"):
        f(X)
        with tj.profile() as p:
            for _ in range(3):
                f(X)
    data = exported(p, tmp_path)
    moved = spans(data, "transfer")
    assert len(moved) == p.transfers.count == 3
    assert sum(e["args"]["bytes copied"] for e in moved) == p.transfers.nbytes == 3 * X.nbytes
    assert all(e["args"]["ops"] == "transfer" for e in moved)
    for steps in steps_by_call(data).values():
        assert len(steps) == len(p.steps)
    assert {e["cat"] for e in spans(data, *STEP_CATS)} >= {"transfer", "kernel"}


def test_the_timeline_is_bounded(tmp_path):
    f = tj.jit(chain, backend="reference")
    f(X, X)
    with tj.profile(max_events=20) as p:
        for _ in range(5):
            f(X, X)
    assert p.functions[0].calls == 5  # the table counts every call
    data = exported(p, tmp_path)
    kept = spans(data)
    assert len(kept) <= 20 and p.dropped_events == 5 * (1 + len(p.steps)) + 2 - len(kept)
    assert data["otherData"]["dropped_events"] == p.dropped_events > 0
    for steps in steps_by_call(data).values():  # a call is kept with all its steps
        assert len(steps) == len(p.steps)
    for bad in (-1, 2.5, True):
        with pytest.raises(InvalidArgument, match="max_events"):
            tj.profile(max_events=bad).__enter__()


def test_a_loop_is_one_step_of_its_own_category(tmp_path):
    def cumulative(xs):
        return tj.lax.scan(lambda c, x: (c + x, c * x), np.float64(0), xs)

    f = tj.jit(cumulative, backend="reference")
    with tj.profile() as p:
        f(np.ones(10))
    data = exported(p, tmp_path)
    (loop,) = spans(data, "loop")
    assert loop["args"]["ops"] == "scan" and loop["args"]["bytes"] > 0
    (scan,) = [s for s in p.steps if s.ops == "scan"]
    assert loop["name"] == f"cumulative/{scan.name}"


class _Tables(HTMLParser):
    """The paragraphs and tables (rows of cell texts) of an HTML fragment."""

    def __init__(self):
        super().__init__()
        self.paragraphs: list[str] = []
        self.tables: list[list[list[str]]] = []
        self._text: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self.tables[-1].append([])
        if tag in ("p", "td", "th"):
            self._text = []

    def handle_endtag(self, tag):
        if tag == "p":
            self.paragraphs.append("".join(self._text))
        elif tag in ("td", "th"):
            self.tables[-1][-1].append("".join(self._text))
        if tag in ("p", "td", "th"):
            self._text = None

    def handle_data(self, data):
        if self._text is not None:
            self._text.append(data)


def test_html_holds_the_table(tmp_path):
    def odd(x):
        return np.tanh(x) * x

    odd.__name__ = "f<&>"  # every cell is escaped
    f = tj.jit(odd, backend="reference")
    with tj.profile() as p:
        for _ in range(2):
            f(X)
    page = p._repr_html_()
    assert "f<&>" not in page and "f&lt;&amp;&gt;" in page
    parsed = _Tables()
    parsed.feed(page)
    parsed.close()
    sections = p.table().split("\n\n")
    assert parsed.paragraphs == sections[0].splitlines()
    text_tables = [[re.split(r"\s{2,}", line.strip()) for line in s.splitlines()]
                   for s in sections[1:]]
    assert parsed.tables == text_tables
    assert parsed.tables[0][1][:2] == ["f<&>(x: f32[8])", "2"]
    assert len(parsed.tables[-1]) == 1 + len(p.steps)


def test_timeline_svg_has_a_row_per_thread(tmp_path):
    f = tj.jit(chain, backend="reference")
    g = tj.jit(double, backend="reference")
    f(X, X)
    with tj.profile() as p:
        worker = threading.Thread(target=lambda: [f(X, X) for _ in range(2)], name="worker")
        worker.start()
        worker.join()
        g(X)  # compiled on the main thread, inside the block
    data = exported(p, tmp_path)
    out = p.render_timeline(tmp_path / "timeline.svg")
    assert out == tmp_path / "timeline.svg"
    root = ET.parse(out).getroot()
    ns = {"svg": "http://www.w3.org/2000/svg"}
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    rows = root.findall("svg:g[@class='track']", ns)
    tids = [e["tid"] for e in data["traceEvents"] if e["name"] == "thread_name"]
    assert len(rows) == len(tids) == 2
    assert [int(r.get("data-tid")) for r in rows] == tids
    texts = ["".join(r.find("svg:text", ns).itertext()) for r in rows]
    assert texts[0].startswith("worker") and texts[1].startswith("MainThread")
    drawn = {rect.get("data-cat") for r in rows for rect in r.findall("svg:rect", ns)}
    assert {"call", "compile", "op"} <= drawn
    empty = tj.profile()
    with empty as q:
        pass
    root = ET.parse(q.render_timeline(tmp_path / "empty.svg")).getroot()
    assert not root.findall("svg:g[@class='track']", ns)
    assert "no profiled calls" in "".join(root.itertext())
