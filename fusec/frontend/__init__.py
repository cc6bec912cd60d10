"""The frontend: the tracer and the NumPy functions it knows, foreign arrays, and ``api`` (:func:`fusec.fuse`,
:class:`fusec.Fused`: signatures, trace caches, calls).

From the bottom up: ``registry`` (the functions fusec traces, by name), ``nodes`` and ``indexing`` (the IR nodes
tracing builds, ``x[key]``), ``scalars`` (runtime scalars), the in-place machinery below the tracer (``aliases``,
``part_update``, ``slice_assign``), ``tracer`` (the :class:`~fusec.frontend.tracer.Tracer` class with all its
methods and operators, and the ufuncs, reductions and layout functions every function module builds on), the
function modules (``composite`` and the ``*_functions`` modules, ``gather_trace``), each registering its
implementations with :func:`fusec.frontend.registry.implements`, and ``trace`` (:func:`~fusec.frontend.trace.
trace_function`, which imports every function module)."""
