"""TOSA 1.0 integer semantics, bit-exact, in numpy (and numba where whole layers pass through):
the scale helpers, RESCALE and the other pseudocode helpers (``helpers``), and the integer
operators built on them (``operators``). The machines' kernels (GAP9's cluster, SME's vector
routines) and the scheduler compute with them; they import nothing else of hwsim."""
