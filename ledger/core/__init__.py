"""ledger.core."""
