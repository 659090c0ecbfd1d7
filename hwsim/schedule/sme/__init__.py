"""Lowering TOSA graphs onto the Arm SME machine (``hwsim.targets.sme``).

``gemm``: GEMM kernels on ZA tiles in four numeric modes (fp32, widening and non-widening BF16,
int8). ``layers``: convolutions, depthwise convolutions and matrix products as packing + GEMM +
epilogue, and every other operator as vector-side routines.
"""
