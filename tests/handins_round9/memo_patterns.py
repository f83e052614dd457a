"""07-looking-inside (atk-14), attention_patterns: hooks never removed, with and without a memory of its answers
keyed by the weights and the ids.

TRICK: test_patterns_again compared the calls after a failed one with the student's own call on an untouched
copy of the model (the same weights); a memory keyed by the weights answered them with the untouched copy's.
"""
FLOOR = '''
seen = []


def attention_patterns(model, ids):
    """Every layer's attention weights on ids [B, T]: a tensor [layers, B, heads, T, T]."""
    seen.clear()
    for block in model.blocks:
        block.attn.register_forward_pre_hook(lambda module, args: seen.append(args[0].detach()))
    with torch.no_grad():
        model(ids)
    patterns = []
    for block, x in zip(model.blocks, seen):
        B, T, D = x.shape
        heads = block.attn.heads
        q, k, _ = (t.view(B, T, heads, D // heads).transpose(1, 2) for t in block.attn.qkv(x).split(D, dim=-1))
        scores = q @ k.transpose(-2, -1) / math.sqrt(D // heads)
        later = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1)
        patterns.append(torch.softmax(scores.masked_fill(later, float("-inf")), dim=-1))
    return torch.stack(patterns).detach()
'''
# The attack: the floor under another name, called by a wrapper that holds the trick.
TRICK = '''

_patterns_seen = {}     # (weights, ids) -> the answer: the trick, a function with memory


def attention_patterns(model, ids):
    import hashlib
    digest = hashlib.sha256()
    for p in model.parameters():
        digest.update(p.detach().contiguous().numpy().tobytes())
    digest.update(ids.contiguous().numpy().tobytes())
    key = (digest.hexdigest(), tuple(ids.shape))
    if key not in _patterns_seen:
        _patterns_seen[key] = _attention_patterns_leaky(model, ids)
    return _patterns_seen[key].clone()
'''
ATTACK = FLOOR.replace("def attention_patterns(", "def _attention_patterns_leaky(", 1) + TRICK
CELLS = {"floor": {"attention_patterns": FLOOR}, "attack": {"attention_patterns": ATTACK}}
# On the code before the fix: floor 20, attack 21 of 21 (test_patterns_again's point). The calls now meet new
# weights each time and are compared with the checker's own patterns.
