"""The SVG picture of a profile's timeline (``Profile.render_timeline``), drawn from its
Trace Event Format JSON so that the picture and the exported trace show the same events.

Hand-written SVG, no plotting library: one row per track (a thread, or a background
compile's track), spans nested below their parent in lanes, a time axis, a legend. Spans
narrower than a pixel that follow each other in one lane are drawn as one block (its
tooltip says how many), so a long profiled loop makes a picture of bounded size.
"""

from __future__ import annotations

import math
from html import escape
from typing import Any

WIDTH = 1200  # px
LABELS = 190  # the track names' column
RIGHT = 24
TOP = 40  # the time axis
LANE = 20  # one nesting level of a track
PAD = 6  # above and below a track's lanes
CHAR = 6.1  # the width of a character at font-size 10, for fitting labels
TINY = 1.0  # px: narrower spans following each other in a lane merge into one block


def svg(trace: dict[str, Any], colours: dict[str, str]) -> str:
    """The picture of ``trace`` (``Profile.trace_events()``), spans coloured by category
    after ``colours`` (category -> CSS colour)."""
    events = trace["traceEvents"]
    names = {e["tid"]: e["args"]["name"] for e in events
             if e["ph"] == "M" and e["name"] == "thread_name"}
    order = {e["tid"]: e["args"]["sort_index"] for e in events
             if e["ph"] == "M" and e["name"] == "thread_sort_index"}
    tracks = sorted(names, key=lambda tid: order.get(tid, 0))
    spans = [e for e in events if e["ph"] == "X"]
    instants = [e for e in events if e["ph"] == "i"]
    t0 = min((e["ts"] for e in spans + instants), default=0.0)
    t1 = max([e["ts"] + e["dur"] for e in spans] + [e["ts"] for e in instants], default=1.0)
    span = max(t1 - t0, 1e-3)
    plot = WIDTH - LABELS - RIGHT
    scale = plot / span

    def x(ts: float) -> float:
        return LABELS + (ts - t0) * scale

    lanes = _lanes(spans)
    depth = {tid: 1 + max((lanes[id(e)] for e in spans if e["tid"] == tid), default=0)
             for tid in tracks}
    tops, y = {}, TOP
    for tid in tracks:
        tops[tid] = y
        y += depth[tid] * LANE + 2 * PAD
    height = y + 40
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
           f'viewBox="0 0 {WIDTH} {height}" font-family="sans-serif" font-size="10">',
           f'<rect width="{WIDTH}" height="{height}" fill="white"/>']
    out += _axis(t0, span, x, TOP, y)
    if not tracks:
        out.append(f'<text x="{LABELS}" y="{TOP + 16}">no profiled calls</text>')
    for i, tid in enumerate(tracks):
        top = tops[tid]
        row_h = depth[tid] * LANE + 2 * PAD
        out.append(f'<g class="track" data-tid="{tid}">')
        if i % 2 == 0:
            out.append(f'<rect x="0" y="{top}" width="{WIDTH}" height="{row_h}" '
                       f'fill="#f4f4f4"/>')
        label = _fit(names[tid], LABELS - 12)
        out.append(f'<text x="6" y="{top + PAD + 14}" font-weight="bold">'
                   f'{escape(label)}<title>{escape(names[tid])} (thread {tid})</title></text>')
        mine = sorted((e for e in spans if e["tid"] == tid), key=lambda e: (e["ts"], -e["dur"]))
        for block in _blocks(mine, lanes, scale):
            out += _span(block, x(block[0]["ts"]), top + PAD + lanes[id(block[0])] * LANE,
                         block[-1]["ts"] + block[-1]["dur"] - block[0]["ts"], scale, colours)
        for e in instants:
            if e["tid"] == tid:
                out += _instant(e, x(e["ts"]), top, row_h, TOP, y, colours)
        out.append("</g>")
    out += _legend({e["cat"] for e in spans + instants}, colours, y + 14)
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _lanes(spans: list[dict]) -> dict[int, int]:
    """Each span's nesting level in its track (0: outermost), by id."""
    level: dict[int, int] = {}
    open_ends: dict[int, list[float]] = {}
    for e in sorted(spans, key=lambda e: (e["ts"], -e["dur"])):
        stack = open_ends.setdefault(e["tid"], [])
        while stack and stack[-1] <= e["ts"] + 1e-6:  # (ts + dur: rounding's last bits)
            stack.pop()
        level[id(e)] = len(stack)
        stack.append(e["ts"] + e["dur"])
    return level


def _blocks(spans: list[dict], lanes: dict[int, int], scale: float) -> list[list[dict]]:
    """The spans to draw, each a list: one span, or tiny ones of a category following each
    other in a lane, drawn as one block."""
    blocks: list[list[dict]] = []
    last: dict[int, list[dict]] = {}  # lane -> its last block
    for e in spans:
        lane = lanes[id(e)]
        prev = last.get(lane)
        if prev is not None and e["dur"] * scale < TINY and prev[-1]["cat"] == e["cat"]:
            end = prev[-1]["ts"] + prev[-1]["dur"]
            if (e["ts"] - end) * scale < TINY and (end - prev[0]["ts"]) * scale < 2 * TINY:
                prev.append(e)
                continue
        last[lane] = [e]
        blocks.append(last[lane])
    return blocks


def _span(block: list[dict], left: float, top: float, dur: float, scale: float,
          colours: dict[str, str]) -> list[str]:
    e = block[0]
    width = max(dur * scale, 0.5)
    if len(block) == 1:
        details = [f"{e['name']} ({e['cat']}): {_duration(e['dur'])}"]
        details += [f"{k}: {v}" for k, v in e["args"].items()]
    else:
        details = [f"{len(block)} {e['cat']} spans, {_duration(sum(b['dur'] for b in block))}"]
    fill = colours.get(e["cat"], "#999999")
    out = [f'<rect x="{left:.2f}" y="{top + 1}" width="{width:.2f}" height="{LANE - 2}" '
           f'fill="{fill}" stroke="white" stroke-width="0.5" data-cat="{escape(e["cat"])}">'
           f'<title>{escape(chr(10).join(details))}</title></rect>']
    label = _fit(_label(e), width - 6) if len(block) == 1 else ""
    if label:
        out.append(f'<text x="{left + 3:.2f}" y="{top + LANE - 6}" fill="white" '
                   f'pointer-events="none">{escape(label)}</text>')
    return out


def _label(e: dict) -> str:
    """A span's label: a step's name and ops (``kernel1: add, tanh``), else its name."""
    ops = e["args"].get("ops")
    return f"{e['args']['step']}: {ops}" if ops is not None else e["name"]


def _instant(e: dict, at: float, top: float, row_h: float, axis: float, bottom: float,
             colours: dict[str, str]) -> list[str]:
    colour = colours.get(e["cat"], "#222222")
    mid = top + row_h / 2
    return [f'<line x1="{at:.2f}" y1="{axis}" x2="{at:.2f}" y2="{bottom}" stroke="{colour}" '
            'stroke-dasharray="3,3" stroke-width="1"/>',
            f'<path d="M{at - 5:.2f},{mid - 6:.2f} L{at + 5:.2f},{mid - 6:.2f} '
            f'L{at:.2f},{mid + 4:.2f} Z" fill="{colour}" data-cat="{escape(e["cat"])}">'
            f'<title>{escape(e["name"])}</title></path>']


def _axis(t0: float, span: float, x, top: float, bottom: float) -> list[str]:
    """Ticks every 1, 2 or 5 times a power of ten, in ms from the first event."""
    raw = span / 8
    power = 10.0 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    decimals = max(0, -math.floor(math.log10(step / 1e3)))
    out = [f'<line x1="{LABELS}" y1="{top}" x2="{WIDTH - RIGHT}" y2="{top}" stroke="#444"/>',
           f'<text x="6" y="{top - 12}">time (ms)</text>']
    k = 0
    while k * step <= span * (1 + 1e-9):
        at = x(t0 + k * step)
        out.append(f'<line x1="{at:.2f}" y1="{top - 4}" x2="{at:.2f}" y2="{bottom}" '
                   'stroke="#dddddd" stroke-width="0.5"/>')
        out.append(f'<text x="{at:.2f}" y="{top - 10}" text-anchor="middle">'
                   f'{k * step / 1e3:.{decimals}f}</text>')
        k += 1
    return out


def _legend(categories: set[str], colours: dict[str, str], y: float) -> list[str]:
    out, left = [], LABELS
    for cat in (c for c in colours if c in categories):
        out.append(f'<rect x="{left}" y="{y - 9}" width="12" height="12" '
                   f'fill="{colours[cat]}"/>')
        out.append(f'<text x="{left + 16}" y="{y + 1}">{escape(cat)}</text>')
        left += 30 + CHAR * len(cat)
    return out


def _fit(text: str, width: float) -> str:
    """``text``, shortened with an ellipsis to fit ``width`` px ('' if not 3 characters)."""
    room = int(width // CHAR)
    if len(text) <= room:
        return text
    return text[: room - 1] + "…" if room >= 4 else ""


def _duration(us: float) -> str:
    return f"{us / 1e3:.3f} ms" if us >= 1e3 else f"{us:.1f} µs"
