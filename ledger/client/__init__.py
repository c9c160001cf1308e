"""ledger.client."""
