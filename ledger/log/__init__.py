"""The log itself: the Log facade, the group-commit sequencer that appends, the cached
reader that proves, the newest checkpoint seen, and the post-quantum checkpoint line."""
