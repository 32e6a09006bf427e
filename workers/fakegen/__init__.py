"""Fake text-to-video generator: a stand-in for the real model binary.

It follows the gpusched binary contract (docs/fakegen.md): progress lines on stdout,
checkpoint on SIGTERM and resume on restart, a deterministic YUV4MPEG2 output written
atomically, and switchable failure modes (crash, hang, oom, corrupt). Standard library only.
"""
