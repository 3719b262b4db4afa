"""NVIDIA Apex in one command: a doctor for its build environment, and a narrowed from-source build."""
