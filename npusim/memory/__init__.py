"""Memories of the chip model: on-chip local buffers (:mod:`.local`), global memory (:mod:`.gm`)
and the chip-wide HBM/L2 bandwidth calendar (:mod:`.bandwidth`)."""
