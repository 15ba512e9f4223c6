"""The model side of the engine (torch): loading, the paged forward pass, sampling."""
