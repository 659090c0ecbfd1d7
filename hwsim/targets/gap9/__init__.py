"""GreenWaves GAP9: the 8+1-core cluster, L1/L2/MRAM with the cluster DMA, and the NE16."""
