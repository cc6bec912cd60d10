"""Schedules: how one region runs on the GPU, as plain, frozen, hashable data, one class per kernel kind.

A schedule says everything about a kernel's shape on the GPU that is a choice rather than a fact of the
region: the block shape, the elements each thread handles and its vector width, what is held in
registers and what is recomputed, the grid policy and the workspace it needs. This module holds what every
kind's schedule has (:class:`Schedule`), the text form they share and the request a user writes; each kernel
kind (:mod:`fusec.kinds`) defines its own schedule class beside its heuristics and its lowering, which reads the
schedule and nothing else to decide the kernel's shape.

Every schedule prints as one line that parses back (``explain`` shows it, ``--schedule`` takes it)::

    pointwise:vector,vec=4
    pointwise:vector,vec=4,outline=1
    pointwise:tiled,tile=32
    reduce-all:last_block,loop=vector,vec=4
    rows:block_regs,threads=256,elems=32,vec=4,hold=3+5,fast_division=1,lengths=bucket
    rows:warp
    cols:tiles,tile=32,split=8
    cols:grid_barrier,tile=32,split=8,blocks=0,one_pass=0
    cols:grid_barrier,tile=1,split=256,blocks=0
    scan:rows,threads=256,elems=8
    scan:sequential

A line may leave fields out (``rows:warp_regs``): :func:`fusec.kinds.resolve` fills them in for the region at
hand.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, ClassVar

from fusec.support.errors import FusecValueError

if TYPE_CHECKING:
    from fusec.schedule.contract import VectorAccess
    from fusec.schedule.nest import LoopNest

BLOCK = 256  # threads per block of the one-dimensional schedules
WARP = 32
MIN_RESIDENT = 2  # __launch_bounds__(threads, 2): up to 128 registers per thread


class ScheduleError(FusecValueError):
    """A schedule that does not parse, or does not fit the region it is forced on."""


@dataclass(frozen=True)
class Schedule:
    """What every kind's schedule has. Subclasses add their own fields."""

    kind: ClassVar[str]
    variants: ClassVar[tuple[str, ...]]
    variant_field: ClassVar[str]  # the field the variant (the word after ``kind:``) sets
    # text key -> field name, for the fields a schedule line may set
    keys: ClassVar[dict[str, str]] = {}
    # optional flags (``one_pass``): None where they do not apply to the region, else on or off; the text
    # leaves them out where they are None or have the value the heuristics give them (:meth:`natural`)
    quiet: ClassVar[tuple[str, ...]] = ()

    @property
    def variant(self) -> str:
        """The word after ``kind:`` in the text: the value of the field :attr:`variant_field` names."""
        return getattr(self, self.variant_field)

    @property
    def block(self) -> tuple[int, int]:
        """Threads per block (x, y)."""
        return (BLOCK, 1)

    @property
    def threads(self) -> int:
        return self.block[0] * self.block[1]

    @property
    def min_resident(self) -> int:
        """The kernel's second launch bound: blocks per SM that ptxas plans registers for."""
        return MIN_RESIDENT

    @property
    def persistent(self) -> bool:
        """A grid capped at the resident capacity (SMs x resident blocks), each block looping over many
        units; else a block per unit of work, up to the largest grid."""
        return False

    @property
    def cooperative(self) -> bool:
        """The kernel waits at a grid barrier, so every block must be resident at once."""
        return False

    @property
    def workspace(self) -> bool:
        """The kernel takes a zeroed global workspace (block partials, arrival counters)."""
        return False

    def text(self) -> str:
        """The schedule as one line, every field written out, that :func:`parse_schedule` reads back into
        this very schedule."""
        return ",".join([f"{self.kind}:{self.variant}"]
                        + [f"{key}={_value_text(getattr(self, name))}" for key, name in self.keys.items()
                           if name not in self.quiet or getattr(self, name) not in (None, self.natural(name))])

    def __str__(self) -> str:
        return self.text()

    def _flag_text(self, name: str) -> str:
        """``,name=0`` or ``,name=1`` for an optional flag the text shows, else nothing."""
        value = getattr(self, name)
        return "" if value in (None, self.natural(name)) else f",{name}={int(value)}"

    def natural(self, name: str) -> bool:
        """The value the heuristics give optional flag ``name`` where it applies: ``one_pass`` is on unless the
        rows sit in registers, where a second pass reads registers (:func:`fusec.schedule.heuristics.one_pass_pays`)."""
        return not getattr(self, "in_registers", False)

    def scalar(self) -> Schedule:
        """This schedule's scalar variant: the same kernel shape reading and writing one element at a time, which
        asks nothing of its arrays' alignment (itself where it has no vector accesses). The runtime runs it where
        a launch's arrays do not meet the vector kernel's launch contract (:mod:`fusec.schedule.contract`)."""
        return self

    @property
    def in_registers(self) -> bool:
        """Whether the kernel reads its rows into registers once (a register-row schedule)."""
        return False

    def vector_accesses(self, nest: LoopNest) -> list[VectorAccess]:
        """Every array access this schedule makes with vectors over ``nest`` (the nest the kernel computes: with
        one-pass statistics where the schedule says so), exactly as its template emits them; none by default.
        The launch contract (:func:`fusec.schedule.contract.launch_contract`) is built from them."""
        return []


@dataclass(frozen=True)
class ScheduleRequest:
    """A schedule as a user writes it: the kind's schedule class, the variant, and the fields given (the rest are
    the heuristics' for the region). ``str()`` is the text it was parsed from, normalized."""

    schedule_type: type[Schedule]
    variant: str
    given: tuple[tuple[str, Any], ...] = ()

    @property
    def kind(self) -> str:
        return self.schedule_type.kind

    def __str__(self) -> str:
        names = {v: k for k, v in self.schedule_type.keys.items()}
        return ",".join([f"{self.kind}:{self.variant}"] + [f"{names[n]}={_value_text(v)}" for n, v in self.given])

    def build(self, defaults: Mapping[str, Any] = ()) -> Schedule:
        """The schedule: ``defaults`` (field values from the heuristics) overridden by the fields given."""
        cls = self.schedule_type
        values = {f.name: v for f in fields(cls) if (v := dict(defaults).get(f.name)) is not None}
        values[cls.variant_field] = self.variant
        values.update(self.given)
        return cls(**values)


def parse_schedule_text(text: str, schedule_types: Mapping[str, type[Schedule]]) -> ScheduleRequest:
    """``rows:block_regs,threads=256,elems=32`` -> a :class:`ScheduleRequest` of the class ``schedule_types`` has for
    its kind (raises :class:`ScheduleError` naming what is wrong). :func:`fusec.kinds.parse_schedule` passes every
    registered kind's."""
    head, _, rest = text.strip().partition(",")
    kind, sep, variant = head.partition(":")
    kind, variant = kind.strip(), variant.strip()
    cls = schedule_types.get(kind)
    if cls is None or not sep:
        raise ScheduleError(f"schedule {text!r}: expected KIND:VARIANT[,KEY=VALUE...] with KIND one of "
                            f"{', '.join(schedule_types)}")
    if variant not in cls.variants:
        raise ScheduleError(f"schedule {text!r}: {kind} schedules are {', '.join(cls.variants)}, not {variant!r}")
    given: dict[str, Any] = {}
    for item in filter(None, (p.strip() for p in rest.split(","))):
        key, eq, value = item.partition("=")
        key = key.strip()
        if not eq or key not in cls.keys:
            known = ", ".join(cls.keys) or "none"
            raise ScheduleError(f"schedule {text!r}: {item!r} is not KEY=VALUE with a {kind} key ({known})")
        name = cls.keys[key]
        default = next(f.default for f in fields(cls) if f.name == name)
        try:
            if isinstance(default, bool) or name in cls.quiet:
                if value.strip() not in ("0", "1", "true", "false"):
                    raise ValueError(value)
                given[name] = value.strip() in ("1", "true")
            elif isinstance(default, int):
                given[name] = int(value)
            elif isinstance(default, str):
                given[name] = value.strip()
            elif value.strip() == "none":  # a tuple of member indices, empty
                given[name] = ()
            else:  # a tuple of member indices
                given[name] = tuple(sorted({int(v) for v in value.split("+")}))
        except ValueError:
            raise ScheduleError(f"schedule {text!r}: {key}={value!r} is not a valid value") from None
    return ScheduleRequest(cls, variant, tuple(given.items()))


# a schedule forced on a kernel, as a caller gives it: a whole Schedule, a request (fields left out), or its text
ForcedSchedule = Schedule | ScheduleRequest | str


def _value_text(value: Any) -> str:
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, tuple):
        return "+".join(map(str, value)) if value else "none"
    return str(value)


__all__ = ["BLOCK", "MIN_RESIDENT", "WARP", "ForcedSchedule", "Schedule", "ScheduleError", "ScheduleRequest",
           "parse_schedule_text"]
