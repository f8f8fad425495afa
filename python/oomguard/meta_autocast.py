"""oomguard's autocast on meta (`m.autocast` there), and what torch.is_autocast_enabled() says inside it.

Note [Autocast on meta as the loop sees it]: on meta `m.autocast` enters oomguard's own autocast (the cpu's
table, or with kernels="cuda" AutocastCUDA's: Note [AutocastCUDA on meta]), which torch's autocast state
knows nothing of: torch.is_autocast_enabled() stayed False. Library code reads it to choose a path: the fast
paths of nn.MultiheadAttention, nn.TransformerEncoderLayer and nn.TransformerEncoder are not taken under
autocast (`torch.is_autocast_enabled()`, which asks about CUDA), and on a GPU under torch.autocast("cuda")
they are not; in card mode meta took them, other ops and bytes than the card's. So while a meta measurement runs,
torch.is_autocast_enabled(device_type) is True inside m.autocast for the device whose table casts, as it is
inside torch.autocast on that device: "cuda" (and no argument, which means cuda) in card mode, "cpu" on
cpu's table (where the fast paths ask about cuda and are taken, as on cpu). Outside m.autocast, and for other
devices, PyTorch's own answer.
"""
import threading

import torch

from oomguard import _core
from oomguard.patches import Patches

_tables = threading.local()  # the tables of the m.autocast scopes entered on this thread, innermost last


def _innermost_table():
    stack = getattr(_tables, "stack", None)
    return stack[-1] if stack else None


class MetaAutocast:
    """_core.MetaAutocast, whose table torch.is_autocast_enabled() reports while it is entered."""

    def __init__(self, dtype):
        self._scope = _core.MetaAutocast(dtype)

    def __enter__(self):
        table = self._scope.__enter__()
        if not hasattr(_tables, "stack"):
            _tables.stack = []
        _tables.stack.append(table)
        return table

    def __exit__(self, *exc):
        _tables.stack.pop()
        self._scope.__exit__(*exc)
        return False


class AutocastSeenOnMeta:
    """torch.is_autocast_enabled patched for a meta measurement's duration (Note [Autocast on meta as the
    loop sees it])."""

    def __init__(self):
        self._patches = Patches()

    def enter(self):
        original = torch.is_autocast_enabled

        def is_autocast_enabled(*args, **kwargs):
            table = _innermost_table()
            device_type = args[0] if args else kwargs.get("device_type", "cuda")
            if table is not None and device_type == table:
                return True
            return original(*args, **kwargs)

        self._patches.patch(torch, "is_autocast_enabled", is_autocast_enabled)

    def exit(self):
        self._patches.undo()
