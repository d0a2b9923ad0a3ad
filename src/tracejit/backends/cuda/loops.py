"""The CUDA backend's loops: a ``scan`` or ``while_loop`` node placed on a GPU runs as a
Python driver that calls its body's runner once per step.

Each body graph is compiled by this backend as a graph of its own (``body_graph``): placed
on the loop's GPU with every input there, since placement moved the loop's inputs to the
GPU before the loop (once per call, not per step). Its kernels form a CUDA module and its
runner is generated as any graph's, so a step costs the body's launches and nothing else:

- the carry stays on the GPU: step ``t``'s outputs are step ``t + 1``'s inputs;
- ``xs[k][t]`` is a view of the device array ``xs[k]``, no copy;
- each ``y`` is stacked on the GPU: allocated before the first step, step ``t``'s slice
  copied into row ``t`` on the device.

No step transfers anything between host and device, with one exception: ``while_loop``
reads its condition back to the host before each step (a one-byte device-to-host copy,
which also waits for the step's kernels), because the host decides whether to launch the
next step. A loop of ``n`` steps reads it ``n + 1`` times; only device-side control flow
(a persistent kernel, or CUDA graphs' conditional nodes) would avoid that.
"""

from __future__ import annotations

from collections.abc import Callable

from ... import targets
from ...ir import Graph, Node
from ...ir.loop_ops import Scan
from ...passes.placement import place

LOOPS = ("scan", "while_loop")


def body_graph(body: Graph, target, supports: Callable[[Node], bool]) -> Graph:
    """``body`` placed on ``target`` with every input there: the loop's inputs are device
    arrays (the placement pass put the loop on the GPU only if ``supports`` holds for
    every node of its bodies, so no transfer is inserted here)."""
    return place(body, target, [target] * len(body.inputs), supports, targets.CPU)


def driver(cupy, node: Node, runs: dict[str, Callable[..., list]]) -> Callable[..., tuple]:
    """The function running loop ``node`` on device arrays, with ``runs[name]`` the
    compiled runner of each of its bodies (``"body"``, and ``"cond"`` for a while loop);
    it returns the loop's results as a tuple, as the op's NumPy implementation does."""
    loop = node.attrs["loop"]
    if isinstance(loop, Scan):
        return _scan(cupy, runs["body"], loop)
    return _while(runs["cond"], runs["body"], loop.n_consts)


def _scan(cupy, body: Callable[..., list], loop: Scan) -> Callable[..., tuple]:
    nc, nk, length = loop.n_consts, loop.n_carry, loop.length
    order = range(length - 1, -1, -1) if loop.reverse else range(length)
    y_types = loop.y_types

    def run(*args) -> tuple:
        consts, carry, xs = list(args[:nc]), list(args[nc:nc + nk]), args[nc + nk:]
        ys = [cupy.empty((length, *t.shape), t.dtype) for t in y_types]
        for t in order:
            outs = body(*consts, *carry, *[x[t] for x in xs])
            carry = outs[:nk]
            for y, out in zip(ys, outs[nk:], strict=True):
                y[t] = out  # a device-to-device copy into the stacked result
        return (*carry, *ys)

    return run


def _while(cond: Callable[..., list], body: Callable[..., list],
           n_consts: int) -> Callable[..., tuple]:
    def run(*args) -> tuple:
        consts, carry = list(args[:n_consts]), list(args[n_consts:])
        while bool(targets.to_host(cond(*consts, *carry)[0])):  # the one read per step
            carry = body(*consts, *carry)
        return tuple(carry)

    return run
