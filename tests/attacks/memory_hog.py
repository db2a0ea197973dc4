"""Allocate memory until it fails (an instant 40 GiB request, then 100 MiB at a time)."""
# %%
try:
    big = bytearray(40 * 2 ** 30)
except MemoryError as e:
    print("40 GiB refused", e)
# %%
chunks = []
try:
    while True:
        chunks.append(bytearray(100 * 2 ** 20))
except MemoryError:
    print("stopped at", len(chunks) * 100, "MiB")
del chunks
