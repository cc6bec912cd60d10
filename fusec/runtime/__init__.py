"""The runtime layer: plans (``plan``), the executable a call runs (``executable``: a plan with its compiled kernels,
``out=`` and the writes into arguments of ``write_backs``), kernels' launch (``launch``), the fast path of a repeated
call (``dispatch``), the GPU (``gpu``), the compiled-kernel and tuning caches, autotuning, and the NumPy reference
backend (``plan``)."""
