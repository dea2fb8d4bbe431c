"""Spark jobs over hqueue queues (export, report, load). Not built yet: issue 6."""
