"""Fault scenarios across test hosts ("chaos"), each with a checker over what was
acknowledged and what was read: :mod:`hqueue.testing.chaos.scenarios` (the scenarios
and their sizes), :mod:`hqueue.testing.chaos.rig` (the hosts and servers they run
on) and :mod:`hqueue.testing.chaos.workload` (the producers and readers).

``python -m hqueue.testing.chaos [SCENARIO ...] [--size small|full]`` runs them and
prints each one's table (``make chaos`` runs every one at full size). Needs root
(network namespaces and iptables)."""
