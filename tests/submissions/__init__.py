"""Notebooks as students hand them in, built from the distributed exercise notebooks (see
README.md and build.py)."""
