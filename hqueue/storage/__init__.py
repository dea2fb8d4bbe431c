"""Storage access: the one happybase pool wrapper over HBase's Thrift gateways, the one
range reader of queue rows, and the one client of sidecars. Below the client, the
metadata backends and the sidecar; above the wire layer."""
