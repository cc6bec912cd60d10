"""A host stand-in for CuPy: :mod:`.memory` (allocations at 256-byte aligned addresses), :mod:`.array`
(``cupy.ndarray`` over NumPy views of them), :mod:`.cuda` (one sm_90 device, streams, modules of real cubins) and
:mod:`.modules` (the ``cupy``, ``cupyx`` and ``cupy_backends`` module objects, and ``install``)."""
