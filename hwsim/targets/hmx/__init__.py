"""The Qualcomm Hexagon HMX machine (V81 HMX Programmer's Reference Manual, FP16).

``machine.py`` (the wiring: checks, units, ports), ``state.py`` (the HMX's registers),
``semantics.py`` (each instruction's op and action), ``datapath.py`` (what a multiply or a write
computes, from the VTCM and the state), ``numerics.py`` (datapath kernels; float64 arithmetic
proven exact in ``exact64.py``), ``layouts.py`` (VTCM layouts as pack/unpack pairs), ``hvx.py``
(HVX layout, copy and arithmetic work) with its kernels in ``hvx_kernels.py``, ``params.py``
(parameters with sources); the instruction words and syntax are in ``hwsim/isa/hmx.py``.
"""
