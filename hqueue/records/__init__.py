"""Record schemas: the JSON Schema and Avro codecs of typed messages
(:mod:`~hqueue.records.codec`), the compatibility checks between versions
(:mod:`~hqueue.records.avro_compat`, :mod:`~hqueue.records.json_compat`) and the
rules that apply them (:mod:`~hqueue.records.rules`). Pure functions over schemas and
bytes: no server, no metadata. docs/schemas.md is the user's view."""
