"""Talking to stores and servers.

The backend interface (local store or server), the HTTP client, sign-in and
credentials, copies between stores, export and import, and the pre-flight a
packet passes before it leaves the user's machine.
"""
