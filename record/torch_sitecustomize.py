# lockstep record --torch: loaded by Python at start-up in every rank (the folder that holds this
# file is first on PYTHONPATH). It runs the sitecustomize this one shadows, then arms the
# recorder of torch.distributed calls (lockstep_torch.py, docs/record.md).
import os
import sys


def _chain_shadowed_sitecustomize():
    here = os.path.dirname(os.path.abspath(__file__))
    for entry in sys.path:
        if not entry or os.path.abspath(entry) == here:
            continue
        path = os.path.join(entry, "sitecustomize.py")
        if os.path.isfile(path):
            with open(path, "rb") as source:
                code = compile(source.read(), path, "exec")
            exec(code, {"__name__": "sitecustomize", "__file__": path})
            return


try:
    _chain_shadowed_sitecustomize()
except Exception as error:  # a broken site file must not stop the recording
    sys.stderr.write("lockstep record: the shadowed sitecustomize failed: %r\n" % (error,))

if os.environ.get("LOCKSTEP_TORCH_DIR"):
    import lockstep_torch

    lockstep_torch.arm()
