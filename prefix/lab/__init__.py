"""``cachegate lab``: the seed's experiment, worked numbers, trace replay, TTFT fit."""
