#!/usr/bin/env python
"""Build the GPU fuzzer's corpus and precompile its kernels here, on a CPU (NVRTC needs no GPU):

    python scripts/make_fuzz_corpus.py --count 5000 --seed 0 --out .fuzz/corpus.fir --cubins .fuzz/cubin --arch sm_90

1. generates ``--count`` graphs (``tests.fuzz.corpus.generate``) and writes them to ``--out``;
2. in fresh processes that read ``--out`` back (so every constant is what the GPU machine will parse), plans
   each graph and renders every kernel source ``tests/gpu/test_fuzz_gpu.py`` will compile: C-contiguous
   inputs, and the non-contiguous views of every 5th graph;
3. compiles the distinct sources with ``fusec.runtime.launch.precompile`` into ``--cubins`` (``FUSEC_CUBIN_CACHE``;
   sound entries already there are skipped, so a rerun after a codegen change compiles only what changed,
   and a truncated or corrupt entry again);
   a source NVRTC rejects is listed in ``<cubins>/failed.txt`` (its cache digest, the graphs that use it,
   the first error line), which the GPU test reads to report those graphs without compiling them again;
4. with ``--archive``, also packs ``--cubins`` into ``<cubins>.tar.xz`` (cubins compress about 10x).

``--reuse-corpus`` skips step 1 and reads ``--out``: after a codegen change, it compiles only the kernels
whose source changed (``failed.txt`` is rewritten from this run's failures).

On the GPU machine: ``FUSEC_FUZZ_CORPUS=.fuzz/corpus.fir FUSEC_FUZZ_CUBINS=.fuzz/cubin pytest -m gpu -s
tests/gpu/test_fuzz_gpu.py``. The cubins match the sources of the fusec checkout that built them: after a
codegen change, run this again with ``--reuse-corpus`` before the GPU run, or the changed kernels compile there.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import hashlib
import multiprocessing
import os
import re
import sys
import tarfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

_GRAPHS: list | None = None


def _load_corpus(path: str) -> None:
    global _GRAPHS
    from tests.fuzz.corpus import load

    _GRAPHS = load(path)


def _sources_of(indices: list[int]) -> list[tuple[int, list[str] | None, str | None]]:
    """(index, sources, error) for each graph: every kernel source the GPU test compiles for it."""
    from fusec.runtime.plan import make_plan
    from tests.fuzz.corpus import graph_sources

    assert _GRAPHS is not None
    out = []
    for i in indices:
        try:
            out.append((i, graph_sources(i, _GRAPHS[i], make_plan(_GRAPHS[i])), None))
        except Exception as exc:  # a planning or codegen crash: reported, the rest goes on
            out.append((i, None, f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"))
    return out


def _compile(job: tuple[str, str]) -> str | None:
    """Compile one source into the cache with ``precompile``; None, or NVRTC's first error line."""
    from fusec.codegen.nvrtc import CompileError
    from fusec.runtime.launch import precompile

    source, arch = job
    try:
        precompile([source], arch, workers=1)
        return None
    except CompileError as exc:
        errors = [line.strip() for line in str(exc).splitlines() if "error:" in line or "error :" in line]
        return errors[0] if errors else " ".join(str(exc).split())[:200]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=".fuzz/corpus.fir")
    parser.add_argument("--cubins", default=".fuzz/cubin")
    parser.add_argument("--arch", default="sm_90")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--archive", action="store_true", help="also write <cubins>.tar.xz")
    parser.add_argument("--reuse-corpus", action="store_true",
                        help="read the graphs from --out instead of generating them (after a codegen change)")
    args = parser.parse_args(argv)

    cubins = Path(args.cubins).resolve()
    os.environ["FUSEC_CUBIN_CACHE"] = str(cubins)  # before fusec.runtime.launch is used, here and in the workers
    from fusec.runtime.cubin_cache import cubin_path as _cubin_path
    from fusec.runtime.cubin_cache import is_cached as _cubin_cached
    from tests.fuzz.corpus import generate, load, save

    start = time.perf_counter()
    if args.reuse_corpus:
        graphs = load(args.out)
    else:
        graphs = generate(args.count, args.seed)
        save(args.out, graphs)
    families: dict[str, int] = {}
    for g in graphs:
        family = g.name.split("_", 1)[1]
        families[family] = families.get(family, 0) + 1
    t_gen = time.perf_counter() - start
    print(f"{'read' if args.reuse_corpus else 'generated'} {len(graphs)} graphs "
          f"({'' if args.reuse_corpus else f'seed {args.seed}; '}{families}) in {t_gen:.1f} s: {args.out}", flush=True)

    t0 = time.perf_counter()
    chunks = [list(range(k, len(graphs), 64 * args.workers)) for k in range(64 * args.workers)]
    chunks = [c for c in chunks if c]
    spawn = multiprocessing.get_context("spawn")  # fresh processes parse the file as the GPU machine will
    with concurrent.futures.ProcessPoolExecutor(args.workers, mp_context=spawn, initializer=_load_corpus,
                                                initargs=(str(Path(args.out).resolve()),)) as pool:
        from fusec.support.progress import progress

        done = progress(pool.map(_sources_of, chunks), "plan and render", unit="chunk", total=len(chunks))
        results = [r for chunk in done for r in chunk]
    results.sort()
    users: dict[str, list[int]] = {}
    launches = 0
    plan_errors = []
    for i, sources, error in results:
        if error is not None:
            plan_errors.append((i, error))
            continue
        launches += len(sources)
        for s in sources:
            users.setdefault(s, []).append(i)
    t_render = time.perf_counter() - t0
    print(f"planned and rendered in {t_render:.1f} s: {launches} kernel launches, {len(users)} distinct sources"
          + (f", {len(plan_errors)} graphs failed to plan/render" if plan_errors else ""), flush=True)
    for i, error in plan_errors[:10]:
        print(f"  graph {i} ({graphs[i].name}): {error}")

    t0 = time.perf_counter()
    cubins.mkdir(parents=True, exist_ok=True)
    listing = cubins / "failed.txt"
    known: dict[str, str] = {}  # digest -> error, from an earlier run: the same source fails again
    if listing.is_file():
        for line in listing.read_text().splitlines():
            parts = line.split("\t")
            if len(parts) >= 3:
                known[parts[0]] = parts[2]
    failed: dict[str, str] = {}
    todo = []
    for s in users:
        digest = _cubin_path(s, args.arch).stem
        if digest in known:
            failed[s] = known[digest]
        elif not _cubin_cached(s, args.arch):  # none yet, or truncated or corrupt
            todo.append(s)
    print(f"compiling {len(todo)} sources for {args.arch} with {args.workers} workers "
          f"({len(users) - len(todo) - len(failed)} already in {cubins}, {len(failed)} known to fail)", flush=True)
    fork = multiprocessing.get_context("fork")
    done = rejected = 0
    with concurrent.futures.ProcessPoolExecutor(max(1, args.workers), mp_context=fork) as pool:
        for source, error in zip(todo, pool.map(_compile, [(s, args.arch) for s in todo], chunksize=4)):
            done += 1
            if error is not None:
                failed[source] = error
                rejected += 1
            if done % 500 == 0:
                rate = (time.perf_counter() - t0) / done
                print(f"  {done}/{len(todo)} ({rejected} failed), {rate * 1000:.0f} ms each, "
                      f"{rate * (len(todo) - done):.0f} s to go", flush=True)
    t_compile = time.perf_counter() - t0
    lines = []
    for source, error in failed.items():
        digest = _cubin_path(source, args.arch).stem
        lines.append(f"{digest}\tgraphs={','.join(map(str, users[source]))}\t{error}")
    listing.write_text("".join(line + "\n" for line in lines))
    failing_graphs = sorted({i for s in failed for i in users[s]})
    n_cubins = sum(1 for _ in cubins.glob("*.cubin"))
    size = sum(p.stat().st_size for p in cubins.glob("*.cubin"))
    print(f"compiled {len(todo) - rejected} in {t_compile:.1f} s"
          + (f" ({t_compile / len(todo) * 1000:.0f} ms a source with {args.workers} workers)" if todo else ""))
    if failed:
        kinds: dict[str, int] = {}
        for error in failed.values():
            key = re.sub(r"\d+", "N", error.split(": ", 1)[-1])  # v0, v1, ... undefined: one kind
            kinds[key] = kinds.get(key, 0) + 1
        print(f"NVRTC rejected {len(failed)} sources, used by {len(failing_graphs)} graphs (listed in "
              f"{cubins / 'failed.txt'}):")
        for key, n in sorted(kinds.items(), key=lambda kv: -kv[1])[:10]:
            print(f"  {n} x {key}")
        print(f"  first graphs: {failing_graphs[:20]}")
    manifest = hashlib.sha256("".join(sorted(_cubin_path(s, args.arch).stem for s in users)).encode()).hexdigest()
    print(f"cubin cache: {cubins} ({n_cubins} cubins, {size / 2**20:.1f} MiB; corpus sources digest {manifest[:16]})")
    if args.archive:
        archive = cubins.with_name(cubins.name + ".tar.xz")
        with tarfile.open(archive, "w:xz") as tar:
            for p in sorted(cubins.iterdir()):
                tar.add(p, arcname=p.name)
        print(f"archive: {archive} ({archive.stat().st_size / 2**20:.1f} MiB)")
    print(f"total {time.perf_counter() - start:.1f} s (generate {t_gen:.1f}, render {t_render:.1f}, "
          f"compile {t_compile:.1f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
