"""ledger.http."""
