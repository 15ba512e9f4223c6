"""prefix.lab.experiment package."""
