"""ledger.cli."""
