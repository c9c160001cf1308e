"""notary.store."""
