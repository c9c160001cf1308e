"""Where ``--publish`` writes a log's static tlog-tiles tree (pure): a directory or a bucket.

``--publish DIR`` names a local directory; ``--publish s3://BUCKET[/PREFIX]`` an S3-compatible
bucket, reached with the standard AWS configuration (environment and shared files), never with
anything given on the command line. Any other ``scheme://`` is refused: a typo such as
``s4://`` or ``gs://`` must not quietly become a local directory of that name.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ledger.core.errors import LedgerError

__all__ = ["BucketTarget", "PublishTargetError", "parse_publish_target"]

# S3's bucket-name rules (3-63 characters, lower case, digits, dots and hyphens, starting and
# ending with a letter or digit): refusing a bad name at start beats a 400 on every round.
_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://")


class PublishTargetError(LedgerError, ValueError):
    """A ``--publish`` value that names no directory and no bucket we can write."""


@dataclass(frozen=True)
class BucketTarget:
    """``s3://bucket/prefix``: objects are written at ``prefix`` + a tlog-tiles path."""

    bucket: str
    prefix: str  # "" or ending in "/"

    def url(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}"

    def key(self, path: str) -> str:
        return self.prefix + path

    def under(self, sub: str) -> BucketTarget:
        """The same bucket, ``sub`` (a relative path) below this prefix."""
        return BucketTarget(self.bucket, self.prefix + sub.strip("/") + "/")


def parse_publish_target(value: str) -> BucketTarget | str:
    """A :class:`BucketTarget` for ``s3://``, else ``value`` itself (a directory path)."""
    m = _SCHEME.match(value)
    if m is None:
        return value
    scheme = m.group(1).lower()
    if scheme != "s3":
        raise PublishTargetError(
            f"unknown scheme {m.group(1)}:// (want a directory or s3://BUCKET/PREFIX)")
    rest = value[m.end():]
    bucket, _, prefix = rest.partition("/")
    if not bucket:
        raise PublishTargetError("s3:// needs a bucket name (s3://BUCKET/PREFIX)")
    if not _BUCKET.fullmatch(bucket) or ".." in bucket:
        raise PublishTargetError(f"{bucket!r} is not a valid S3 bucket name")
    parts = [p for p in prefix.split("/") if p]
    if any(p in (".", "..") for p in parts) or "\0" in prefix:
        raise PublishTargetError(f"{prefix!r} is not a usable key prefix")
    return BucketTarget(bucket, "".join(p + "/" for p in parts))
