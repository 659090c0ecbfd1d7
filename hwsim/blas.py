"""One BLAS thread for hwsim's products.

The numpy products hwsim runs (a layer's fp64 references in the check, the vector routines'
and cluster kernels' integer products in a simulation) are small: OpenBLAS's threads spinning
against other processes made them 10-60x slower than one thread on two loaded cores (measured).
"""

from __future__ import annotations

import functools

from threadpoolctl import ThreadpoolController


@functools.cache
def _controller() -> ThreadpoolController:
    return ThreadpoolController()


def one_thread():
    """A context in which BLAS runs on one thread (about 20 us to enter)."""
    return _controller().limit(limits=1, user_api="blas")
