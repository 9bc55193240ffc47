"""Reaching client hosts: transports (local, SSH) and long-running tool services."""
