"""Attributes of PyTorch's Python set for a measurement's duration, and put back at its end (newest first)."""


class Patches:
    def __init__(self):
        self._undo = []

    def patch(self, owner, name, value):
        self._undo.append((owner, name, getattr(owner, name)))
        setattr(owner, name, value)

    def undo(self):
        for owner, name, original in reversed(self._undo):
            setattr(owner, name, original)
        self._undo = []
