#!/usr/bin/env python
"""Source replay: every CUDA source fusec generates for a fixed set of programs, saved so that a change to
the planner, the schedules, lowering or the templates can be checked to change generated code only where it
means to (as tinygrad's process replay does).

    python scripts/replay_sources.py record build/replay/before.jsonl.gz [--corpus N]
    ... change fusec ...
    python scripts/replay_sources.py record build/replay/after.jsonl.gz [--corpus N]
    python scripts/replay_sources.py compare build/replay/before.jsonl.gz build/replay/after.jsonl.gz

The programs (each an id and the full sources of its kernels, in launch order; each source as one
translation unit, its helper headers inlined, so a change to a header shows in every program that includes it):

- ``kernels/<workload>/<i>``: every variant of ``tests/codegen/test_kernels.py``'s workloads (one region over
  the whole function, each dtype and layout listed there), the cases the goldens come from;
- ``examples/<name>/<shape>``: each example function at its benchmark shape and at odd ones, through
  ``Fused.cuda_source`` (the whole pipeline);
- ``cases/<id>``: every case of ``tests/correctness/cases.py`` that computes, on its own NumPy arguments
  (their layouts: transposed, reversed, broadcast, offset);
- ``corpus/<i>``: the GPU fuzzer's graphs (``tests/fuzz/corpus.generate(N, seed=0)``, read back from the
  saved text as the GPU machine reads them) with ``tests/fuzz/corpus.graph_sources``: contiguous inputs, and
  every 5th graph also on non-contiguous views.

``compare`` prints how many programs differ, each differing id, and the first lines of the first diffs.
"""

from __future__ import annotations

import argparse
import difflib
import gzip
import hashlib
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

EXAMPLE_SHAPES = {  # example -> (its array arguments' shapes from one shape, the shapes)
    "sum_abs": (lambda s: [s], [(1 << 28,), (1029, 917), (7,)]),
    "gelu": (lambda s: [s], [(1 << 28,), (1029, 917), (7,)]),
    "softmax": (lambda s: [s], [(8192, 8192), (1029, 917), (4, 3)]),
    "layernorm": (lambda s: [s], [(8192, 8192), (1029, 917), (4, 3)]),
    "rmsnorm": (lambda s: [s, s[-1:]], [(8192, 8192), (1029, 917)]),
    "moe_router": (lambda s: [s], [(1 << 20, 64), (1029, 917)]),
    "adam": (lambda s: [s] * 4, [(1 << 26,), (1029, 917)]),
}


def _kernel_programs() -> Iterator[tuple[str, list[str]]]:
    from fusec.codegen.render import render_kernel
    from tests.codegen.test_kernels import WORKLOADS

    for name, w in sorted(WORKLOADS.items()):
        for i, v in enumerate(w.variants):
            yield f"kernels/{name}/{i}", [render_kernel(v.spec(w.fn, f"{name}{i}"))]


def _example_programs() -> Iterator[tuple[str, list[str]]]:
    import importlib.util

    import fusec

    for name, (arg_shapes, shapes) in EXAMPLE_SHAPES.items():
        spec = importlib.util.spec_from_file_location(f"example_{name}", ROOT / "examples" / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        fn = getattr(module, name)
        fused = fn if isinstance(fn, fusec.Fused) else fusec.fuse(fn)
        for shape in shapes:
            specs = [fusec.ArraySpec(s, "float32") for s in arg_shapes(shape)]
            yield f"examples/{name}/{'x'.join(map(str, shape))}", [fused.cuda_source(*specs, full=True)]


def _case_programs() -> Iterator[tuple[str, list[str]]]:
    import fusec
    from tests.correctness.cases import CASES

    for case in CASES:
        if case.raises is not None or case.large:
            continue
        call = case.make(np, np.random.default_rng(0))
        try:
            source = fusec.fuse(case.fn).cuda_source(*call.args, full=True)
        except Exception as exc:  # noqa: BLE001 - recorded as the program's result
            source = f"<{type(exc).__name__}>"
        yield f"cases/{case.id}", [source]


def _corpus_programs(count: int, workdir: Path) -> Iterator[tuple[str, list[str]]]:
    from fusec.runtime.plan import make_plan
    from tests.fuzz.corpus import generate, graph_sources, load, save

    path = workdir / f"corpus-{count}.fir"
    if not path.is_file():
        save(str(path), generate(count, 0))
    for i, graph in enumerate(load(str(path))):
        try:
            sources = graph_sources(i, graph, make_plan(graph))
        except Exception as exc:  # noqa: BLE001 - recorded as the program's result
            sources = [f"<{type(exc).__name__}: {exc}>"]
        yield f"corpus/{i}", sources


def record(out: Path, corpus: int) -> None:
    from fusec.codegen.render import inline_headers

    out.parent.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    n = 0
    digest = hashlib.sha256()
    with gzip.open(out, "wt", encoding="utf-8") as f:
        for group in (_kernel_programs(), _example_programs(), _case_programs(),
                      _corpus_programs(corpus, out.parent)):
            for pid, sources in group:
                sources = [inline_headers(src) for src in sources]  # translation units as compiled
                f.write(json.dumps({"id": pid, "sources": sources}) + "\n")
                digest.update(pid.encode() + b"\0" + "\0".join(sources).encode())
                n += 1
    print(f"{n} programs recorded in {out} ({time.perf_counter() - start:.0f} s); digest {digest.hexdigest()[:16]}")


def _read(path: Path) -> dict[str, list[str]]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return {d["id"]: d["sources"] for d in map(json.loads, f)}


def compare(before: Path, after: Path, show: int) -> int:
    a, b = _read(before), _read(after)
    missing = sorted(set(a) - set(b))
    added = sorted(set(b) - set(a))
    changed = [pid for pid in a if pid in b and a[pid] != b[pid]]
    print(f"{len(a)} programs before, {len(b)} after: {len(changed)} differ, {len(missing)} missing, "
          f"{len(added)} new")
    for pid in missing[:20]:
        print(f"  missing: {pid}")
    for pid in added[:20]:
        print(f"  new: {pid}")
    for pid in changed[:30]:
        print(f"  differs: {pid}")
    for pid in changed[:show]:
        old, new = "\n".join(a[pid]), "\n".join(b[pid])
        diff = list(difflib.unified_diff(old.splitlines(), new.splitlines(), f"before/{pid}", f"after/{pid}",
                                         lineterm="", n=2))
        print("\n".join(diff[:80]))
    return 1 if changed or missing or added else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    rec = sub.add_parser("record")
    rec.add_argument("out", type=Path)
    rec.add_argument("--corpus", type=int, default=5000, help="fuzz corpus graphs (seed 0)")
    cmp_ = sub.add_parser("compare")
    cmp_.add_argument("before", type=Path)
    cmp_.add_argument("after", type=Path)
    cmp_.add_argument("--show", type=int, default=3, help="diffs to print")
    args = parser.parse_args(argv)
    if args.command == "record":
        record(args.out, args.corpus)
        return 0
    return compare(args.before, args.after, args.show)


if __name__ == "__main__":
    sys.exit(main())
