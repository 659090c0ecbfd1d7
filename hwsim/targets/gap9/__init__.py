"""GreenWaves GAP9: the 8+1-core cluster, L1/L2/MRAM with the cluster DMA, and the NE16.

``machine.py`` (the wiring: units, ports, parsing), ``state.py`` (memories and the NE16's
register contexts), ``semantics.py`` (what each instruction does and which ops it becomes),
``params.py`` (parameters with sources), ``cluster_kernels.py`` (the worker cores' kernels, costed
by ``cluster_cost.py`` and ``tcdm.py``), ``quant.py`` (the quantisation scheme) and ``ne16/``
(the neural engine's jobs, layouts, datapath and timing); the instruction syntax and the NE16
register words are in ``hwsim/isa/gap9.py`` and ``hwsim/isa/ne16.py``.
"""
