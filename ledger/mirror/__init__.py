"""A C2SP tlog-mirror: a cosigner that keeps a full copy of each log it mirrors, serves it as
tlog-tiles under ``/<origin hash>/``, and cosigns only what it has durably stored."""
