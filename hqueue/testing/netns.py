"""Several hosts on one machine: Linux network namespaces on a bridge, for tests of what
crosses a network (a link cut, a slow or lossy link).

A :class:`TestNetwork` is a bridge in the machine's own namespace with the address
``10.213.N.1/24``; each :meth:`TestNetwork.host` is a network namespace of its own, joined
to the bridge by a veth pair, with the next address of that subnet and its own
loopback. Processes started with :meth:`Host.command` (``ip netns exec``) see only
that host's interfaces: a server bound to :attr:`Host.address` is reached from the
other hosts and from the machine's namespace through the bridge, and from nowhere
else. The machine's own namespace is a host too, at the bridge's address
(:attr:`TestNetwork.gateway`): servers the tests run there (ZooKeeper, say) bind to it.

Faults, each undone by :meth:`Host.heal`:

- :meth:`Host.cut`: every packet between this host and the given addresses is dropped
  (iptables in the host's namespace, both directions), or only those of one TCP port
  (a server's, on either side: a host cut from ZooKeeper but not from HBase at the
  same address), as a partition of the network does: connections hang, they are not
  refused;
- :meth:`Host.lose`: the host drops a share of the packets it sends, at random
  (iptables' ``statistic`` match), as a lossy link does.

Delay is not among them: ``tc netem`` needs the kernel's ``sch_netem``, which the
machines this runs on lack; a test that needs a slow link puts a delaying proxy on
the path instead.

Needs root (``ip netns`` and iptables), as the tests here and in CI run. Every name
starts with ``hq`` and the network's number. A live network holds an exclusive lock on
its number (a file under ``/run/hqueue-netns``), so that parallel test workers each
take a free number, and a number whose lock is free may be cleared of what a killed
run left behind (:func:`remove_stale`).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from collections.abc import Sequence

__all__ = ["Host", "TestNetwork", "netns_available", "remove_stale"]

_PREFIX = "hq"
_LOCKS = "/run/hqueue-netns"


def _claim(number: int) -> int | None:
    """Take the lock on network ``number``; return its open file (held while the
    network lives), or None when a live network holds it."""
    os.makedirs(_LOCKS, exist_ok=True)
    fd = os.open(f"{_LOCKS}/{number}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def netns_available() -> bool:
    """Return whether this process may make network namespaces (root, iproute2 and
    iptables present)."""
    return os.geteuid() == 0 and all(shutil.which(t) for t in ("ip", "iptables"))


def _run(*argv: str) -> str:
    """Run one command; return its output.

    :raises RuntimeError: it failed (its error output in the message)."""
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed: {done.stderr.strip() or done.stdout}")
    return done.stdout


def remove_stale(number: int | None = None) -> None:
    """Remove the namespaces and bridges of test networks (of network ``number`` only,
    when given) that a run killed before its clean-up left behind. The caller makes
    sure no live network has that number (it holds the number's lock, or no test
    runs)."""

    def ours(name: str, tail: str) -> bool:
        if number is not None:
            return name.startswith(f"{_PREFIX}{number}{tail}")
        head, _, _ = name.partition(tail)
        return name.startswith(_PREFIX) and head[len(_PREFIX) :].isdigit()

    for line in _run("ip", "netns", "list").splitlines():
        name = line.split()[0] if line.split() else ""
        if ours(name, "-"):
            subprocess.run(["ip", "netns", "del", name], capture_output=True, check=False)
    for line in _run("ip", "-o", "link", "show").splitlines():
        name = line.split(":")[1].strip().split("@")[0]
        # The bridges, and veth ends whose namespace is gone but which the kernel
        # has not removed yet (it does so after the namespace, asynchronously).
        if (ours(name, "br") and name.endswith("br")) or (
            ours(name, "v") and name.partition("v")[2].isdigit()
        ):
            subprocess.run(["ip", "link", "del", name], capture_output=True, check=False)


def _cut_rules(address: str, port: int | None) -> list[tuple[str, list[str]]]:
    """The iptables rules (chain, match and target) of a cut from ``address``."""
    if port is None:
        return [
            ("INPUT", ["-s", address, "-j", "DROP"]),
            ("OUTPUT", ["-d", address, "-j", "DROP"]),
        ]
    tcp = ["-p", "tcp"]
    return [
        ("INPUT", ["-s", address, *tcp, side, str(port), "-j", "DROP"])
        for side in ("--sport", "--dport")
    ] + [
        ("OUTPUT", ["-d", address, *tcp, side, str(port), "-j", "DROP"])
        for side in ("--sport", "--dport")
    ]


class Host:
    """One test host: a network namespace with one address on its network's bridge.
    Made by :meth:`TestNetwork.host`."""

    def __init__(self, network: TestNetwork, name: str, index: int) -> None:
        self.network = network
        self.name = name
        self.namespace = f"{network.prefix}-{name}"
        self.address = f"{network.subnet}.{index + 1}"
        self._outside = f"{network.prefix}v{index}"  # its veth end on the bridge
        self._cut: set[tuple[str, int | None]] = set()
        self._loss: str | None = None

    def _create(self) -> None:
        ns = self.namespace
        _run("ip", "netns", "add", ns)
        _run(
            "ip", "link", "add", self._outside, "type", "veth", "peer", "name", "eth0", "netns", ns
        )
        _run("ip", "link", "set", self._outside, "master", self.network.bridge, "up")
        self.run("ip", "link", "set", "lo", "up")
        self.run("ip", "addr", "add", f"{self.address}/24", "dev", "eth0")
        self.run("ip", "link", "set", "eth0", "up")

    def command(self, argv: Sequence[str]) -> list[str]:
        """Return ``argv`` as run on this host (in its namespace)."""
        return ["ip", "netns", "exec", self.namespace, *argv]

    def run(self, *argv: str) -> str:
        """Run a command on this host and wait for it; return its output.

        :raises RuntimeError: it failed."""
        return _run(*self.command(argv))

    def cut(self, *addresses: str, port: int | None = None) -> None:
        """Drop every packet between this host and ``addresses`` (hosts' or the
        gateway's), both ways, until :meth:`heal`; with ``port``, only the TCP packets
        to or from that port on either side (a server's port, here or there)."""
        for address in addresses:
            if (address, port) in self._cut:
                continue
            for chain, rule in _cut_rules(address, port):
                self.run("iptables", "-I", chain, *rule)
            self._cut.add((address, port))

    def lose(self, percent: float) -> None:
        """Drop ``percent`` (0..100) of the packets this host sends, at random, until
        :meth:`heal`."""
        if not 0 <= percent <= 100:
            raise ValueError(f"'percent' must be in 0..100, not {percent}")
        self._unlose()
        self._loss = f"{percent / 100:.4f}"
        self.run("iptables", "-I", "OUTPUT", *self._loss_rule())

    def _loss_rule(self) -> list[str]:
        assert self._loss is not None
        return ["-m", "statistic", "--mode", "random", "--probability", self._loss, "-j", "DROP"]

    def _unlose(self) -> None:
        if self._loss is not None:
            self.run("iptables", "-D", "OUTPUT", *self._loss_rule())
            self._loss = None

    def heal(self) -> None:
        """Undo :meth:`cut` and :meth:`lose`."""
        for address, port in sorted(self._cut, key=str):
            for chain, rule in _cut_rules(address, port):
                self.run("iptables", "-D", chain, *rule)
        self._cut.clear()
        self._unlose()

    def __repr__(self) -> str:
        return f"Host({self.name!r}, {self.address})"


class TestNetwork:
    """A bridge and the hosts on it (see the module's docstring); a context manager
    that removes them all.

    ``number`` (1..254) picks the subnet ``10.213.number.0/24`` and the names'
    prefix; left out, :meth:`start` takes the lowest number no live network holds, so
    that networks of parallel test workers do not meet."""

    __test__ = False  # not a pytest test class

    def __init__(self, number: int | None = None) -> None:
        if number is not None and not 1 <= number <= 254:
            raise ValueError(f"'number' must be in 1..254, not {number}")
        self._wanted = number
        self._lock: int | None = None
        self.hosts: dict[str, Host] = {}
        if number is not None:
            self._name(number)

    def _name(self, number: int) -> None:
        self.number = number
        self.prefix = f"{_PREFIX}{number}"
        self.subnet = f"10.213.{number}"
        self.bridge = f"{self.prefix}br"
        self.gateway = f"{self.subnet}.1"

    def start(self) -> TestNetwork:
        """Take a number and make the bridge (after clearing what an earlier run of
        that number left).

        :raises RuntimeError: the number asked for is in use, or all are."""
        numbers = [self._wanted] if self._wanted is not None else range(1, 255)
        for number in numbers:
            self._lock = _claim(number)
            if self._lock is not None:
                self._name(number)
                break
        else:
            raise RuntimeError(
                f"test network {numbers[0]} is in use"
                if self._wanted
                else "all 254 test networks are in use"
            )
        remove_stale(self.number)
        _run("ip", "link", "add", self.bridge, "type", "bridge")
        _run("ip", "addr", "add", f"{self.gateway}/24", "dev", self.bridge)
        _run("ip", "link", "set", self.bridge, "up")
        return self

    def host(self, name: str) -> Host:
        """Make a host named ``name`` (a few letters and digits) with the next address.

        :raises ValueError: a host of that name exists, or the subnet is full."""
        if name in self.hosts:
            raise ValueError(f"host {name!r} exists")
        if len(self.hosts) >= 250:
            raise ValueError("a test network holds at most 250 hosts")
        host = Host(self, name, len(self.hosts) + 1)
        self.hosts[name] = host  # before it exists: close() removes a half-made one
        host._create()
        return host

    def close(self) -> None:
        """Remove every host and the bridge; idempotent."""
        for host in self.hosts.values():
            # The veth first: deleting the namespace removes it only later.
            subprocess.run(["ip", "link", "del", host._outside], capture_output=True, check=False)
            subprocess.run(["ip", "netns", "del", host.namespace], capture_output=True, check=False)
        self.hosts.clear()
        if self._lock is not None:
            subprocess.run(["ip", "link", "del", self.bridge], capture_output=True, check=False)
            os.close(self._lock)  # the number is free again
            self._lock = None

    def __enter__(self) -> TestNetwork:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
