"""The client library: :func:`connect`, :class:`Client`, :class:`Queue`, the producer,
the scanners, the subscriber and queue administration. Users import these names from
:mod:`hqueue`."""
