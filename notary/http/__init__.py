"""notary.http."""
