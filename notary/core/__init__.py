"""notary.core."""
