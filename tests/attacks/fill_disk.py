"""Fill the disk: write to the working folder and /tmp until it fails."""
# %%
import os

written = 0
block = b"x" * 2 ** 20
try:
    with open("/tmp/fill", "wb") as f:
        while written < 8 * 2 ** 30:
            f.write(block)
            written += len(block)
except OSError as e:
    print("stopped after", written // 2 ** 20, "MiB:", e)
finally:
    try:
        os.remove("/tmp/fill")
    except OSError:
        pass
