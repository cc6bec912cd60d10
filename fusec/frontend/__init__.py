"""The frontend: the tracer and the NumPy functions it knows (``trace`` and the ``*_functions`` modules), the
in-place machinery (``inplace``, ``aliases``, ``part_update``, ``slice_assign``), foreign arrays, and ``api``
(:func:`fusec.fuse`, :class:`fusec.Fused`: signatures, trace caches, calls)."""
