"""03-block (atk-11's hunreg_up, the bridge's rule undone): the kernel's bridge is the student's to replace, so the
check cannot rest on it. The block cell also finds the bridge (through gc), swaps its attribute() for plain getattr and switches
tables.refuse_shadows off, as a hand-in can; the block's reference still reads only the tensors its randomization
drew (by name), so up's weight in __dict__ is refused there and not read.
"""
import runpy, pathlib
_base = runpy.run_path(str(pathlib.Path(__file__).with_name("hunreg_up.py")))

UNDO = '''
import gc as _gc
for _found in _gc.get_objects():                      # TRICK: the kernel's side of the checker, as it was before
    if type(_found).__name__ == "Bridge" and hasattr(type(_found), "op_getattr"):
        _bridge = type(_found).op_getattr.__globals__
        _bridge["attribute"] = lambda target, name: getattr(target, name)
        _bridge["tables"].refuse_shadows = lambda module: None
'''

HANDINS = {
    "atk11-unreg-up-undone-floor": _base["HANDINS"]["atk11-unreg-up-floor"],
    "atk11-unreg-up-undone-attack": {**_base["HANDINS"]["atk11-unreg-up-attack"],
                                     "block": _base["HANDINS"]["atk11-unreg-up-attack"]["block"] + UNDO},
}
