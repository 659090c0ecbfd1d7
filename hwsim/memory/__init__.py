"""Where the bytes are: address spaces and the DMA engine."""

from hwsim.memory.dma import Copy, Dma
from hwsim.memory.space import AddressSpace, as_bytes

__all__ = ["AddressSpace", "Copy", "Dma", "as_bytes"]
