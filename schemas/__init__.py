"""The JSON Schema of every metadata value, installed as ``hqueue.metadata.json_schemas``.

The ``.json`` files beside this one are the schemas; this file only makes the folder a
package, so :mod:`importlib.resources` finds them in an editable install, the wheel and
a Spark executor alike (read by :mod:`hqueue.metadata.schemas`).
"""

__all__: list[str] = []
