"""The ``--publish`` value (and ``ledger export``'s OUT): a directory or an S3 bucket prefix,
checked before anything is opened, so that a mistake is a usage error at start."""

from __future__ import annotations

from pathlib import Path

from ledger.core.publish_target import BucketTarget, PublishTargetError, parse_publish_target
from ledger.process.exitcodes import UsageError

__all__ = ["publish_target"]


def publish_target(value: str, what: str = "--publish") -> Path | BucketTarget:
    """A directory, or a bucket prefix (``s3://BUCKET/PREFIX``) when the S3 client is
    installed; anything else a :class:`UsageError` naming ``what``."""
    try:
        target = parse_publish_target(value)
    except PublishTargetError as e:
        raise UsageError(f"{what} {value[:60]!r}: {e}") from None
    if isinstance(target, str):
        return Path(target)
    from ledger.jobs.sinks import s3_client_missing  # deferred: the jobs, not for `--help`

    missing = s3_client_missing()
    if missing is not None:
        raise UsageError(f"{what}: {missing}")
    return target
