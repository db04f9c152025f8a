"""The instruction set: one class per Ascend C instruction (STYLE §1).

Groups: :mod:`.dma` (DataCopy, DataCopyPad, LoadData), :mod:`.cube` (Mmad, Fixpipe),
:mod:`.vector` (elementwise, reduce, cast, select, gather...), :mod:`.sync` (flags, barriers,
cross-core flags, SyncAll). Calling an instruction class issues it on the current core.
"""
