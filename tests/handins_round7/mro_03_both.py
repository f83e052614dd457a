"""03-block: mro_attention.py's and mro_block_03.py's cells in one hand-in."""
from tests.handins_round7 import mro_attention, mro_block_03

CELLS = {kind: {**mro_attention.CELLS[kind], **mro_block_03.CELLS[kind]} for kind in ("floor", "attack")}
