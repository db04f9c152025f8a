"""Vector instructions (PIPE_V): the public names of :mod:`.common`, re-exported."""
from npusim.isa.vector.common import *  # noqa: F401,F403
from npusim.isa.vector.common import __all__  # noqa: F401
