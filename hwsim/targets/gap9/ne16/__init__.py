"""The NE16 neural engine: a job's registers (``job``, and ``driver`` computing them for a layer),
its data layouts in L1 (``layout``), its datapath (``datapath``, the numpy twin of the compiled
``kernel``, which reads a job as ``words``) and its timing (``timing``)."""
