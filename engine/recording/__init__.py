"""Recording runs as sessions on disk (``format`` is the contract the reports read)."""
