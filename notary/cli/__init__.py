"""notary.cli."""
