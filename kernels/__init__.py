"""Kernels: plain array functions registered per (op type, place, dtype)."""
