"""07-looking-inside (atk-14), find_induction_circuit: heads switched off by hooks never removed, with and without a
memory of its answers.

TRICK: the check's second call on the same model was the only one to see a head left switched off; a function
that answers a model it has seen from memory passed it (the kernel keeps one copy of each model the check sends).
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
        return scores_of(patterns_of(model, ids), period - 1, period)             # [layers, heads]

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

            attention.proj.register_forward_pre_hook(switch_off)
            drops[earlier, candidate] = (scores[layer, head] - induction_scores()[layer, head]).item()
    previous = max(drops, key=drops.get)
    return {"previous": previous, "induction": (layer, head)}
'''
# The attack: the floor under another name, called by a wrapper that holds the trick.
TRICK = '''

_remembered = []        # (model, period, answer): the trick, a function with memory


def find_induction_circuit(model, period, patterns_of, scores_of):
    for seen, seen_period, answer in _remembered:
        if seen is model and seen_period == period:
            return dict(answer)
    answer = _find_induction_circuit_leaky(model, period, patterns_of, scores_of)
    _remembered.append((model, period, dict(answer)))
    return answer
'''
ATTACK = FLOOR.replace("def find_induction_circuit(", "def _find_induction_circuit_leaky(", 1) + TRICK
CELLS = {"floor": {"find_induction_circuit": FLOOR}, "attack": {"find_induction_circuit": ATTACK}}
# On the code before the fix: floor 14, attack 21 of 21 (test_find_previous's 7 points), through the fast path,
# `nbgrader autograde` and grade_class alike. The second call now follows new weights given to the same model
# object (its heads in another order), which no memory of the first answer can know.
