"""03-block (atk-11's hdecoy_dict, the bridge's rule undone as in hunreg_up_undone.py): the causal bound reads the
weights its randomization drew, by name; the decoys' weights, kept in __dict__, are listed by no table."""
import runpy, pathlib
_base = runpy.run_path(str(pathlib.Path(__file__).with_name("hdecoy_dict.py")))
UNDO = runpy.run_path(str(pathlib.Path(__file__).with_name("hunreg_up_undone.py")))["UNDO"]

HANDINS = {
    "atk11-decoy-dict-undone-floor": _base["HANDINS"]["atk11-decoy-dict-floor"],
    "atk11-decoy-dict-undone-attack": {**_base["HANDINS"]["atk11-decoy-dict-attack"],
                                       "attention": _base["HANDINS"]["atk11-decoy-dict-attack"]["attention"] + UNDO},
}
