"""Access logs without query strings.

uvicorn logs each request as `client - "METHOD /path?query HTTP/1.1" status`.
A query string can carry a secret (a key pasted as `?key=`, a provider's
signed parameters), and access logs are read by more people than the
database: every access line loses its query string before it is written.
"""

from __future__ import annotations

import logging

ACCESS_LOGGER = "uvicorn.access"
PATH_ARG = 2  # uvicorn's args: client, method, path with query, http version, status


class WithoutQueryStrings(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) > PATH_ARG:
            path = args[PATH_ARG]
            if isinstance(path, str) and "?" in path:
                record.args = (*args[:PATH_ARG], path.split("?", 1)[0], *args[PATH_ARG + 1 :])
        return True


def strip_query_strings() -> None:
    """Install the filter on uvicorn's access logger (once per process)."""
    logger = logging.getLogger(ACCESS_LOGGER)
    if not any(isinstance(f, WithoutQueryStrings) for f in logger.filters):
        logger.addFilter(WithoutQueryStrings())
