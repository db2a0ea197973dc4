"""Read a classmate's files (attack 3): the grader used to copy every plain file
beside the notebooks into each kernel's folder, so `bob_helpers.py` (planted by the test
beside the submissions) was importable and came back in the feedback; with `matplotlib.py`
beside them (attack 2) every classmate importing matplotlib ran the attacker's code."""
# %%
import os
raise RuntimeError("seen: " + " ".join(sorted(os.listdir("."))) + " " +
                   (open("bob_helpers.py").read() if os.path.exists("bob_helpers.py") else ""))
