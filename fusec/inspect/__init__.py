"""The inspection layer: ``explain`` and its drawings (``dot``, ``html``), timing on the GPU (``timing``), why
siblings did not merge (``siblings``), and readable kernels (``kernel_report``)."""
