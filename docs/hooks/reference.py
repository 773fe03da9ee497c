"""MkDocs hook: the reference pages, generated from the code at build time.

The pages exist only in the build (nothing to commit, nothing to go
stale): CLI, settings, codes, metrics and provider status mapping from
`tidings.docs_gen`, the HTTP API from
the app's own OpenAPI document, which is also published as openapi.json.
"""

from __future__ import annotations

import json
from typing import Any

from mkdocs.structure.files import File, Files

from tidings import docs_gen


def on_files(files: Files, config: Any) -> Files:
    document = docs_gen.openapi_document()
    pages = {path: build() for path, build in docs_gen.PAGES.items()}
    pages["reference/http.md"] = docs_gen.http_reference(document)
    pages["reference/openapi.json"] = json.dumps(document, indent=2) + "\n"
    for path, content in pages.items():
        files.append(File.generated(config, path, content=content))
    return files
