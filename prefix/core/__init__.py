"""Torch-free bookkeeping of the prefix engine: keys, blocks, sequences, scheduling."""
