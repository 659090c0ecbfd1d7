"""TOSA 0.80 graphs in and out (``docs/tosa-080.md``).

``schema`` (the 0.80 flatbuffer schema as data), ``form`` (a 0.80 graph as its files hold it),
``flatbuf`` (.tosa read/write), ``mlir`` and ``mlir_print`` (MLIR text read/write), ``upgrade``
(0.80 -> hwsim's 1.0 graph IR, keeping the 0.80 meaning) and ``downgrade`` (1.0 -> 0.80).
"""
