"""A secret value that never shows itself in a repr, a log line or an error message."""

from __future__ import annotations

__all__ = ["Secret"]


class Secret:
    """Holds ``value`` (a token, a shared secret); ``repr`` and ``str`` show
    ``Secret(***)``, so printing a settings object or logging an exception that
    carries one reveals nothing. :meth:`reveal` returns the value."""

    __slots__ = ("_value",)

    def __init__(self, value: bytes) -> None:
        self._value = bytes(value)

    def reveal(self) -> bytes:
        """Return the secret's bytes."""
        return self._value

    def __repr__(self) -> str:
        return "Secret(***)"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        import hmac

        return isinstance(other, Secret) and hmac.compare_digest(self._value, other._value)

    def __hash__(self) -> int:
        return hash(Secret)

    def __reduce__(self) -> tuple[type, tuple[bytes]]:
        # Spark ships settings to executors by pickling them.
        return (Secret, (self._value,))
