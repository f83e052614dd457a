"""05-training, cell `attention`: the 03-block hand-in's attack (mro_attention.py) on assignment 5's 2-point check."""
from tests.handins_round7.mro_attention import ATTACK, FLOOR


def without_heads_check(source: str) -> str:
    return source.replace('''        if cfg.width % cfg.heads != 0:
            raise ValueError(f"width {cfg.width} is not divisible by heads {cfg.heads}")
''', "")


CELLS = {"floor": {"attention": without_heads_check(FLOOR)}, "attack": {"attention": without_heads_check(ATTACK)}}
