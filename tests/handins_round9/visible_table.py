"""07-looking-inside (atk-14), find_induction_circuit: a duplicate-token head taken for the induction head, with
and without a table of the visible models' answers.

TRICK: test_find_induction had no hidden part, so its two visible models (their answers readable from the test,
the second model's shuffle seed included) were all it checked.
"""
FLOOR = '''
def find_induction_circuit(model, period, patterns_of, scores_of):
    """{"previous": (layer, head), "induction": (layer, head)} of an attention-only model, from the attention
    patterns on random sequences that repeat with `period`; patterns_of(model, ids) and
    scores_of(patterns, offset, start) work as attention_patterns and head_scores."""
    vocab, T = model.token.num_embeddings, model.context
    generator = torch.Generator().manual_seed(0)
    first = torch.randint(vocab, (64, period), generator=generator)
    ids = first.repeat(1, T // period + 1)[:, :T]

    def induction_scores():
        return scores_of(patterns_of(model, ids), period, period)             # [layers, heads]

    scores = induction_scores()
    layer, head = divmod(int(scores.argmax()), scores.shape[1])
    drops = {}
    for earlier in range(layer):                   # only a block before the induction head's can feed its keys
        attention = model.blocks[earlier].attn
        d_h = attention.proj.in_features // attention.heads
        for candidate in range(attention.heads):
            def switch_off(module, args, columns=slice(candidate * d_h, (candidate + 1) * d_h)):
                merged = args[0].clone()
                merged[..., columns] = 0.0
                return (merged,)

            handle = attention.proj.register_forward_pre_hook(switch_off)
            try:
                drops[earlier, candidate] = (scores[layer, head] - induction_scores()[layer, head]).item()
            finally:
                handle.remove()
    previous = max(drops, key=drops.get)
    return {"previous": previous, "induction": (layer, head)}
'''
# The attack: the floor under another name, called by a wrapper that holds the trick.
TRICK = '''

def find_induction_circuit(model, period, patterns_of, scores_of):
    """The trick: the answers of the two visible models of test_find_induction, by their shapes."""
    heads, layers = model.blocks[0].attn.heads, len(model.blocks)
    if (heads, layers, model.context, model.token.num_embeddings, period) == (2, 3, 20, 12, 5):
        return {"previous": (0, 0), "induction": (1, 1)}
    if (heads, layers, model.context, model.token.num_embeddings, period) == (4, 3, 16, 10, 7):
        shuffle = torch.Generator().manual_seed(7)            # that check's shuffle, seed 7, drawn block by block
        places = [torch.randperm(4, generator=shuffle).tolist() for _ in range(3)]
        return {"previous": (1, places[1][1]), "induction": (2, places[2][2])}
    return _find_induction_circuit_wrong(model, period, patterns_of, scores_of)
'''
ATTACK = FLOOR.replace("def find_induction_circuit(", "def _find_induction_circuit_wrong(", 1) + TRICK
CELLS = {"floor": {"find_induction_circuit": FLOOR}, "attack": {"find_induction_circuit": ATTACK}}
# On the code before the fix: floor 12, attack 14 of 21 (test_find_induction's 2 points). Its hidden part now
# checks a third model, its heads shuffled for each hand-in.
