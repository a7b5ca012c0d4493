"""Providers: one wire format a module. See ``base`` for the protocol."""
