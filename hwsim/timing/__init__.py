"""When things happen: the op table, the two timing engines, statistics and timing parameters.

``optable`` (a program as arrays), ``engine`` (the simpy reference), ``core`` (the compiled
twin), ``effects`` (functional effects at simulated time), ``traffic`` (banked-memory
contention), ``records`` and ``stats`` (what a run leaves), ``params`` (parameter tables).
"""

from hwsim.timing.optable import OpBuilder, OpTable, PortSpec, UnitSpec
from hwsim.timing.params import Param, ParamSet, ParamTable
from hwsim.timing.stats import Result, collect

__all__ = ["OpBuilder", "OpTable", "PortSpec", "UnitSpec", "Param", "ParamSet", "ParamTable",
           "Result", "collect"]
