"""The patterns spinscope names, a module each: what it measures and how it is said (nagle_stall.py: the
responses held by Nagle's algorithm). May import: base (and the analysis package it is part of)."""
