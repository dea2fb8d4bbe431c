"""Thrift plumbing shared by every hqueue server and client: IDL loading, the server loop."""
