"""Package discovery, the one part of the build pyproject.toml cannot say.

The code lives in chalicelib/ (Chalice deploys that folder beside app.py) and in
cli/, and installs as ``ltm`` and ``ltm.cli`` (the mapping is pyproject.toml's
``package-dir``). setuptools' ``find`` names packages after their folders, so
each found package is renamed here under its installed name: a new subpackage
ships without anyone listing it. Everything else is in pyproject.toml.
https://setuptools.pypa.io/en/latest/userguide/package_discovery.html
"""

from setuptools import find_packages, setup


def installed_as(name: str, folder: str) -> list[str]:
    found = find_packages(include=[folder, f"{folder}.*"])
    return [name + package.removeprefix(folder) for package in found]


setup(packages=[*installed_as("ltm", "chalicelib"), *installed_as("ltm.cli", "cli")])
