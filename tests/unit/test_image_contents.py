"""The image copies every package the project installs: one left out installs without
error and fails only when something imports it."""

import re
import tomllib
from pathlib import Path

from setuptools import find_packages

ROOT = Path(__file__).resolve().parents[2]


def test_the_dockerfile_copies_every_top_level_package():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    include = config["tool"]["setuptools"]["packages"]["find"]["include"]
    packages = {p.split(".")[0] for p in find_packages(ROOT, include=include)}
    copied = set(re.findall(r"^COPY (\w+) \1$", (ROOT / "docker" / "Dockerfile").read_text(),
                            re.MULTILINE))
    assert packages and packages <= copied, packages - copied
