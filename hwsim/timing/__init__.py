"""When things happen: the simpy engine, units, ports, statistics and timing parameters."""

from hwsim.timing.engine import Engine, Op, Port, Unit, Work
from hwsim.timing.params import Param, ParamSet, ParamTable
from hwsim.timing.stats import Result, collect

__all__ = ["Engine", "Op", "Port", "Unit", "Work", "Param", "ParamSet", "ParamTable", "Result",
           "collect"]
