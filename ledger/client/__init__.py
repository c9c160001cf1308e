"""The one HTTP client for tlog-tiles logs, notaries and witnesses.

- :mod:`.http`: :class:`~.http.HttpClient` (bounded GET/POST over aiohttp, bounded JSON) and the
  one :class:`~.http.FetchError`; the verifier, the SDK and everything below read through it;
- :mod:`.tiles`: :class:`~.tiles.LogSource`, a log's checkpoint, tiles and consistency proofs;
- :mod:`.pipeline` and :mod:`.framing`: the pipelined HTTP/1.1 tile fetcher and its sans-I/O
  response parser (fuzzed), used by LogSource for bulk downloads;
- :mod:`.witness`: the tlog-witness client (``POST /add-checkpoint``).
"""
