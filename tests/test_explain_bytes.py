"""The bytes ``explain`` reports are what the kernel really reads and writes: for reduce-all kernels with an
epilogue over the elements (clip-grad-norm, standardization), the passes over each array are counted in the
generated CUDA source, loop by loop, and compared with explain's reads, writes and bytes moved."""

from __future__ import annotations

import re

import numpy as np
import pytest

import fusec
from fusec.ir.printer import node_names

F32 = "float32"
# a grid-stride loop over the elements: `for (index_t i = START; i < BOUND; i += stride) {`
_LOOP = re.compile(r"^\s*for \(index_t (\w+) = ([^;]+); \1 < (\w+); \1 \+= stride\) \{$")


def _body(lines: list[str], start: int) -> list[str]:
    """The lines of the braced block opened on ``lines[start]`` (or on a line after it: a long loop header)."""
    depth, out = 0, []
    for line in lines[start:]:
        out.append(line)
        depth += line.count("{") - line.count("}")
        if depth == 0 and "{" in "".join(out):
            return out
    raise AssertionError("unbalanced braces")


def passes_in_source(source: str) -> tuple[dict[str, int], dict[str, int]]:
    """From a reduce-all kernel's source: how many passes over its elements load each ``in<k>`` and store
    each ``out<k>``. A pass is a loop from ``start`` to ``n``, or a vector loop to ``nvec`` together with its
    scalar tail from ``nvec * V + start`` to ``n`` (each vector loop must have its tail, reading the same)."""
    body = source[source.index('extern "C" __global__'):]
    lines = body.splitlines()
    signature_end = next(i for i, line in enumerate(lines) if line.startswith(") {"))
    loads: dict[str, int] = {}
    stores: dict[str, int] = {}
    vector: list[tuple[set, set]] = []
    tails: list[tuple[set, set]] = []
    for i in range(signature_end, len(lines)):
        m = _LOOP.match(lines[i])
        if not m:
            continue
        text = "\n".join(_body(lines, i)[1:])
        read = set(re.findall(r"\b(in\d+)\b", text))
        written = set(re.findall(r"\b(out\d+)\b", text))
        start, bound = m[2], m[3]
        if bound == "nvec" and start == "start":
            vector.append((read, written))
        elif bound == "n" and re.fullmatch(r"nvec \* \d+ \+ start", start):
            tails.append((read, written))
        else:
            assert (start, bound) == ("start", "n"), lines[i]
            for p in read:
                loads[p] = loads.get(p, 0) + 1
            for p in written:
                stores[p] = stores.get(p, 0) + 1
    assert vector == tails, "each vector loop has a scalar tail over the rest of the elements, reading the same"
    for read, written in vector:
        for p in read:
            loads[p] = loads.get(p, 0) + 1
        for p in written:
            stores[p] = stores.get(p, 0) + 1
    return loads, stores


def _bytes(line: str) -> int:
    m = re.search(r"\((\d+) B\)|(\d+) B", line)
    return int(m[1] or m[2])


def clip_grad_norm(g):
    return g * np.minimum(1.0, 1.0 / np.sqrt((g * g).sum()))


def standardize(x):
    return (x - x.mean()) / x.std()


def scale_by_other(x, y):
    return x * np.sqrt((y * y).sum()) + np.abs(y).max()


CASES = [
    (clip_grad_norm, 1, None),
    (clip_grad_norm, 1, "reduce-all:grid_barrier,loop=vector,vec=2"),
    (clip_grad_norm, 1, "reduce-all:grid_barrier,loop=contiguous"),
    (clip_grad_norm, 1, "reduce-all:grid_barrier,loop=strided"),
    (standardize, 1, None),
    (standardize, 1, "reduce-all:grid_barrier,one_pass=0"),
    (scale_by_other, 2, None),
]


@pytest.mark.parametrize("fn, arity, schedule", CASES,
                         ids=[f"{fn.__name__}-{schedule or 'heuristics'}" for fn, _, schedule in CASES])
@pytest.mark.parametrize("n", [1 << 20, 1029])
def test_explain_bytes_of_a_reduce_all_with_an_epilogue_are_the_loads_in_its_source(fn, arity, schedule, n):
    specs = [fusec.ArraySpec((n,), F32)] * arity
    f = fusec.fuse(fn, schedules={"k0": schedule} if schedule else None)
    e = f.explain(*specs)
    (kernel,) = e.plan.kernels
    assert kernel.kind == "reduce-all" and kernel.outputs and kernel.outputs[0].shape == (n,)
    loads, stores = passes_in_source(f.cuda_source(*specs, full=True))
    inputs, outputs = e.kernels[0].spec.inputs, e.kernels[0].spec.outputs
    assert set(loads) == {f"in{k}" for k in range(len(inputs))} and set(stores) == {"out0"}
    read = sum(loads[f"in{k}"] * node.nbytes for k, node in enumerate(inputs))
    written = sum(stores[f"out{k}"] * node.nbytes for k, node in enumerate(outputs))
    assert max(loads.values()) >= 2 or arity > 1, "the epilogue reads the input again"
    report = str(e).splitlines()
    assert _bytes(next(line for line in report if line.startswith("  reads:"))) == read
    assert _bytes(next(line for line in report if line.startswith("  writes:"))) == written
    assert e.bytes_moved == read + written
    assert _bytes(next(line for line in report if line.startswith("  fused:"))) == read + written
    names = node_names(e.plan.graph)
    passes = e.input_passes(0)
    for k, node in enumerate(inputs):
        assert passes[node] == loads[f"in{k}"], names[node]


def test_passes_in_source_counts_a_vector_loop_and_its_tail_as_one_pass():
    source = """extern "C" __global__ void k(
    const float* __restrict__ in0,
    float* __restrict__ out0
) {
  {
    const index_t nvec = n / 4;
    for (index_t iv = start; iv < nvec; iv += stride) {
      const fs::Vec<float, 4> ld0_v = reinterpret_cast<const fs::Vec<float, 4>*>(in0)[iv];
    }
    for (index_t i = nvec * 4 + start; i < n; i += stride) {
      const float ld0 = in0[i];
    }
  }
  for (index_t i = start; i < n; i += stride) {
    out0[i] = in0[i];
  }
}"""
    assert passes_in_source(source) == ({"in0": 2}, {"out0": 1})
    with pytest.raises(AssertionError, match="scalar tail"):
        passes_in_source(source.replace("for (index_t i = nvec * 4 + start; i < n; i += stride) {", "{"))


# --- rows: a pass is a loop over the row inside the loop over rows -------------------------------------------


def row_passes_in_source(source: str) -> dict[str, int]:
    """From a rows kernel's source: how many loops inside the loop over rows (the outermost ones, at any depth
    of ``if`` blocks) load each ``in<k>``: each phase that re-reads the row, the epilogue; one where the row is
    read into registers."""
    lines = source[source.index('extern "C" __global__'):].splitlines()
    start = next(i for i, line in enumerate(lines) if re.match(r"\s*for \(index_t (?:warp_)?row = ", line))
    row_loop = _body(lines, start)
    count: dict[str, int] = {}
    i = next(k for k, line in enumerate(row_loop) if "{" in line) + 1
    while i < len(row_loop) - 1:
        if re.match(r"\s*for \(", row_loop[i]):
            loop = _body(row_loop, i)
            for p in set(re.findall(r"\b(in\d+)\b", "\n".join(loop))):
                count[p] = count.get(p, 0) + 1
            i += len(loop)
        else:
            i += 1
    return count


def softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def layernorm(x, w):
    m = x.mean(-1, keepdims=True)
    return (x - m) / np.sqrt(((x - m) ** 2).mean(-1, keepdims=True) + 1e-5) * w


ROW_CASES = [(softmax, s) for s in (None, "rows:block", "rows:warp", "rows:block,one_pass=0", "rows:warp,one_pass=0")]
ROW_CASES += [(layernorm, s) for s in (None, "rows:block", "rows:block,one_pass=0", "rows:warp_regs")]


@pytest.mark.parametrize("fn, schedule", ROW_CASES, ids=[f"{fn.__name__}-{s or 'heuristics'}" for fn, s in ROW_CASES])
def test_explain_bytes_of_a_rows_kernel_are_the_row_loops_in_its_source(fn, schedule):
    shapes = [(64, 1000), (1000,)][:fn.__code__.co_argcount]
    specs = [fusec.ArraySpec(s, F32) for s in shapes]
    f = fusec.fuse(fn, schedules={"k0": schedule} if schedule else None)
    e = f.explain(*specs)
    (kernel,) = e.plan.kernels
    assert kernel.kind == "rows"
    count = row_passes_in_source(f.cuda_source(*specs, full=True))
    spec = e.kernels[0].spec
    x = spec.inputs[0]
    assert e.input_passes(0)[x] == count["in0"]
    read = sum(kernel.read_bytes(n) * e.input_passes(0)[n] for n in kernel.inputs)
    report = str(e).splitlines()
    assert _bytes(next(line for line in report if line.startswith("  reads:"))) == read
    assert read >= count["in0"] * x.nbytes
