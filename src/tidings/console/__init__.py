"""The operator console: `console_router(runtime)`, mounted at /console."""

from tidings.console.router import console_router

__all__ = ["console_router"]
