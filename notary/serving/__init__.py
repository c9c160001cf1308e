"""The running notary: its settings, key files, opening, the write path (Notary) and workers."""
