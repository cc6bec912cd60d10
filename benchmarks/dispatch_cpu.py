"""The dispatch fast path's own cost on the CPU: :class:`fusec.runtime.dispatch.PlanRunner` calls with fake device
arrays
and a driver that launches nothing, so what is timed is the Python around the launches (finding the outputs,
checking and writing the pointers, calling the driver binding).

    PYTHONPATH=. python benchmarks/dispatch_cpu.py            # microseconds per call, per plan
    PYTHONPATH=. python benchmarks/dispatch_cpu.py --calls 200000 --repeat 7

No GPU needed (``tests/fake_cupy.py`` stands in for CuPy and the driver). The numbers are the host's: compare
them only with numbers from the same machine and interpreter. ``--ab`` times, in one process and interleaved,
each runner against the same runner without its launch-contract tests (every alignment mask 0), so the
contract's own cost shows apart from the machine's noise.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
import timeit
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def _plans():
    import fusec
    from tests.workloads import softmax

    def axpy(x, y):
        return x * 2.0 + y

    def three(x, y):
        s = (x * y).sum()
        return np.tanh(x) + s, (x - y).max(axis=0)

    f32 = np.float32
    return [("axpy 1 kernel, 2 inputs", fusec.fuse(axpy), [(1024,), (1024,)], f32),
            ("softmax rows 1 kernel", fusec.fuse(softmax), [(64, 128)], f32),
            ("3 kernels, 2 inputs", fusec.fuse(three), [(256, 64), (256, 64)], f32)]


def _rebuilt(runner, contract: bool):
    """The same runner (same launches, recyclers, workspace), built again with or without its launch-contract
    tests (both built alike, so only the tests differ)."""
    import dataclasses

    from fusec.runtime.dispatch import PlanRunner

    steps = tuple(step if contract else dataclasses.replace(step, masks=()) for step in runner.steps)
    n_inputs = min(slot for step in steps for slot, *_ in step.outputs)  # the first output follows the inputs
    return PlanRunner(steps, n_inputs, runner.out_slots, runner.device, "list")


def main(argv: list[str] | None = None) -> int:
    import pytest

    from tests.fake_cupy import fake_gpu, to_device

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=100_000, help="calls per timed run")
    ap.add_argument("--repeat", type=int, default=5, help="timed runs (the median is reported)")
    ap.add_argument("--ab", action="store_true", help="time each runner with and without its launch-contract tests "
                                                      "(the fastest of --repeat interleaved runs of each)")
    args = ap.parse_args(argv)
    with pytest.MonkeyPatch.context() as mp, fake_gpu(mp, run_kernels=False):
        from fusec.runtime.launch import default_launcher

        for name, fused, shapes, dtype in _plans():
            arrays = [to_device(np.ones(s, dtype)) for s in shapes]
            plan = fused.plan(*arrays)
            runner = default_launcher().plan_runner(plan, arrays)
            call = functools.partial(runner.run, tuple(arrays))
            call()
            if not args.ab:
                times = timeit.repeat(call, number=args.calls, repeat=args.repeat)
                per_call = [t / args.calls * 1e6 for t in times]
                print(f"{name:28s} {statistics.median(per_call):6.3f} us per call "
                      f"(min {min(per_call):.3f}, max {max(per_call):.3f}; {len(plan.kernels)} kernel(s))")
                continue
            call = functools.partial(_rebuilt(runner, True).run, tuple(arrays))
            plain = functools.partial(_rebuilt(runner, False).run, tuple(arrays))
            plain()
            with_tests, without = [], []
            for k in range(args.repeat):  # interleaved, in turns first, so both see the same machine
                for fn, times in ((call, with_tests), (plain, without))[::1 if k % 2 else -1]:
                    times.append(timeit.timeit(fn, number=args.calls) / args.calls * 1e6)
            a, b = min(with_tests), min(without)  # the least disturbed run of each
            print(f"{name:28s} {a:6.3f} us per call with the contract tests, {b:6.3f} without: "
                  f"{a - b:+.3f} us ({len(plan.kernels)} kernel(s))")
    return 0


if __name__ == "__main__":
    sys.exit(main())
