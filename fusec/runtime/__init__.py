"""The runtime layer: plans and their launch (``launch``), the fast path of a repeated call (``dispatch``), the GPU
(``gpu``), the compiled-kernel and tuning caches, autotuning, and the NumPy reference backend (``plan``)."""
