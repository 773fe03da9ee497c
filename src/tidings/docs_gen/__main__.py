"""`python -m tidings.docs_gen state-diagram|layers|openapi`."""

import sys

from tidings.docs_gen import main

raise SystemExit(main(sys.argv[1:]))
