"""The ZooKeeper MetaStore backend (kazoo): znodes with their versions, ephemeral
entries tied to the ZooKeeper session."""
