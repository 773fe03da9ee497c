"""The `tidings` command: `main` is the console script, `app` the Typer application."""

from tidings.cli.main import app, main

__all__ = ["app", "main"]
