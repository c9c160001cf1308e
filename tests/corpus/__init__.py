"""The cross-language verification corpus (``python -m tests.corpus.generate DIR``)."""
