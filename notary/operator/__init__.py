"""What an operator runs beside or instead of the service: accounts and API keys, backup and
restore, the damaged-store marker, and the monitor's server filter."""
