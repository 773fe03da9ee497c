"""Reference pages for the documentation site, generated from the code.

The site's hook (docs/hooks/reference.py) calls these at build time, so
the CLI, settings, codes, metrics, provider mapping and HTTP references
cannot drift from the code. The state diagram and the layers are the
exceptions: committed, and a test checks each is current:

    python -m tidings.docs_gen state-diagram > docs/concepts/state-diagram.md
    python -m tidings.docs_gen layers   (between the markers of docs/architecture.md)
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable

from tidings.docs_gen.declared import (
    http_reference,
    metrics_reference,
    openapi_document,
    provider_mapping_reference,
    state_diagram,
)
from tidings.docs_gen.layers import layers_section
from tidings.docs_gen.reference import cli_reference, codes_reference, settings_reference

# Site path -> generator, for the pages that exist only in the build.
PAGES: dict[str, Callable[[], str]] = {
    "reference/metrics.md": metrics_reference,
    "reference/provider-status.md": provider_mapping_reference,
    "reference/cli.md": cli_reference,
    "reference/settings.md": settings_reference,
    "reference/codes.md": codes_reference,
}

__all__ = ["PAGES", "http_reference", "main", "openapi_document", "state_diagram"]


def main(argv: list[str]) -> int:
    if argv == ["state-diagram"]:
        sys.stdout.write(state_diagram())
        return 0
    if argv == ["layers"]:
        sys.stdout.write(layers_section())
        return 0
    if argv == ["openapi"]:
        sys.stdout.write(json.dumps(openapi_document(), indent=2) + "\n")
        return 0
    sys.stderr.write("usage: python -m tidings.docs_gen state-diagram|layers|openapi\n")
    return 2
