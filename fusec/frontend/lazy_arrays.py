"""Lazy array libraries a :class:`fusec.Fused` hands its call to (Dask): the frontend asks each registered
handler whether it takes the arguments; the integration registers itself (``fusec/dask`` at ``import fusec``,
without importing its library). The frontend so never imports the layers above it."""

from __future__ import annotations

from typing import Any, Protocol


class LazyArrays(Protocol):
    def takes(self, params: list[tuple[str, Any]]) -> bool:
        """Whether an argument is one of this library's arrays (by type, without importing the library)."""

    def call(self, fused: Any, params: list[tuple[str, Any]], out: Any) -> Any:
        """The call's results as this library's lazy arrays."""

    def explain(self, fused: Any, params: list[tuple[str, Any]]) -> Any:
        """What ``fused.explain`` shows for these arguments."""


_HANDLERS: list[LazyArrays] = []


def register(handler: LazyArrays) -> None:
    if handler not in _HANDLERS:
        _HANDLERS.append(handler)


def handler_for(params: list[tuple[str, Any]]) -> LazyArrays | None:
    """The registered handler that takes these arguments, if any."""
    return next((h for h in _HANDLERS if h.takes(params)), None)
