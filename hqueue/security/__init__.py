"""Who may reach hqueue's ports and do what there: TLS settings, tokens, principals.

A layer of its own, below :mod:`hqueue.wire` (whose servers and clients apply it) and
above :mod:`hqueue.settings` and :mod:`hqueue.errors`. See docs/security.md.
"""
