"""prefix.model.llama package."""
