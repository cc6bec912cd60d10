"""fusec's logging: the standard ``logging`` logger ``fusec`` and one child per topic.

Topics (``TOPICS``): ``fusec.trace`` (each trace: the signature, the time, and why no earlier trace was
reused), ``fusec.recompile`` (each trace after a function's first, with its reasons; each kernel built
again for a new layout of the same shapes, with what changed), ``fusec.compile``
(each kernel compiled or loaded: time, disk cache hit or miss), ``fusec.schedule`` (each kernel's schedule,
chosen by the heuristics or forced) and ``fusec.cache`` (a known signature re-inferred for new shapes, a new
plan). Records are at level INFO, so nothing shows unless
asked for:

- ``FUSEC_LOG=trace,compile`` (any of the topics, comma-separated; ``all`` or ``+all`` for every one)
  prints the chosen topics' records on stderr as ``[fusec.trace] ...``; read once, when fusec is imported;
- :func:`set_logs` does the same from Python (``fusec.set_logs("recompile")``; ``""`` turns them off);
- or configure the loggers yourself (``logging.getLogger("fusec.trace").setLevel(logging.INFO)``); records
  propagate to the root logger unless ``FUSEC_LOG`` or :func:`set_logs` installed fusec's own handler.

Emitting is cheap when a topic is off: callers test :func:`on` before building a message.
"""

from __future__ import annotations

import logging
import os
import sys
import warnings

TOPICS = ("trace", "recompile", "compile", "schedule", "cache")
ROOT = logging.getLogger("fusec")
_LOGGERS = {topic: logging.getLogger(f"fusec.{topic}") for topic in TOPICS}
_HANDLER: logging.Handler | None = None


def logger(topic: str) -> logging.Logger:
    """The logger of ``topic`` (one of :data:`TOPICS`)."""
    return _LOGGERS[topic]


def on(topic: str) -> bool:
    """Whether ``topic``'s INFO records go anywhere (test before building a costly message)."""
    return _LOGGERS[topic].isEnabledFor(logging.INFO)


def emit(topic: str, message: str, *args: object) -> None:
    """Log ``message % args`` on ``topic`` at INFO."""
    _LOGGERS[topic].info(message, *args)


def warn(message: str, *args: object) -> None:
    """Log ``message % args`` at WARNING on the ``fusec`` logger: shown on stderr unless the application's
    logging configuration hides it (for what fusec declined to do and why: a cache directory it does not
    use)."""
    ROOT.warning(message, *args)


def layout_change(old: tuple, new: tuple) -> str:
    """What differs between two launch-layout keys of one kernel (:meth:`fusec.runtime.launch.KernelLauncher.
    cached_recipe`'s: the device, the forced schedule, autotuning, then per array its shape, strides, dtype and pointer
    alignment): "array 0: strides (400, 4) -> (800, 4)"."""
    if old[:3] != new[:3]:  # device, forced schedule, autotuned
        return "another device, forced schedule or autotuning"
    fields = ("shape", "strides", "dtype", "alignment (pointer mod 16)")
    out = []
    for i, (a, b) in enumerate(zip(old[3:], new[3:])):
        for name, x, y in zip(fields, a, b):
            if x != y:
                out.append(f"array {i}: {name} {x} -> {y}")
    return "; ".join(out) or "another output layout"


def parse_topics(text: str) -> tuple[list[str], list[str]]:
    """``FUSEC_LOG``'s value -> (topics turned on, in :data:`TOPICS` order; names not understood)."""
    wanted, unknown = set(), []
    for word in (w.strip().lower() for w in text.split(",")):
        if not word:
            continue
        if word in ("all", "+all"):
            wanted.update(TOPICS)
        elif word.lstrip("+") in TOPICS:
            wanted.add(word.lstrip("+"))
        else:
            unknown.append(word)
    return [t for t in TOPICS if t in wanted], unknown


def set_logs(topics: str | None = None) -> list[str]:
    """Print the records of ``topics`` (as ``FUSEC_LOG``: ``"trace,compile"``, ``"all"``; ``""`` or None:
    none) on stderr, and only those; returns the topics turned on. An unknown topic raises ValueError
    naming the known ones."""
    global _HANDLER
    chosen, unknown = parse_topics(topics or "")
    if unknown:
        raise ValueError(f"unknown fusec log topic(s) {', '.join(unknown)}: the topics are {', '.join(TOPICS)} "
                         "(or all)")
    for topic, log in _LOGGERS.items():
        log.setLevel(logging.INFO if topic in chosen else logging.NOTSET)
    if _HANDLER is None and chosen:
        _HANDLER = logging.StreamHandler(sys.stderr)
        _HANDLER.setFormatter(logging.Formatter("[%(name)s] %(message)s"))
        ROOT.addHandler(_HANDLER)
        ROOT.propagate = False  # printed once, by fusec's handler, not again by the root logger's
    elif _HANDLER is not None and not chosen:
        ROOT.removeHandler(_HANDLER)
        ROOT.propagate = True
        _HANDLER = None
    return chosen


def configure_from_environment() -> None:
    """Apply ``FUSEC_LOG`` (when set): an unknown topic is a warning naming the known ones, not an error."""
    text = os.environ.get("FUSEC_LOG", "")
    if not text:
        return
    chosen, unknown = parse_topics(text)
    if unknown:
        warnings.warn(f"FUSEC_LOG: unknown topic(s) {', '.join(unknown)} ignored: the topics are "
                      f"{', '.join(TOPICS)} (or all)", stacklevel=2)
    set_logs(",".join(chosen))


__all__ = ["TOPICS", "configure_from_environment", "emit", "logger", "on", "parse_topics", "set_logs", "warn"]
