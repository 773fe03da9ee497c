"""Request and response models of the HTTP contract, version 1, by resource.

Requests are checked twice on purpose: these models give clients an exact
OpenAPI schema and reject wrong types early; the domain parsers (e.g.
`IntentRequest.parse`) stay the authority on meaning, as for library
callers. Responses never carry a raw destination, a variable value or
rendered content. `common` holds the field types every request shares.
"""
