"""``python -m ipyagent.kernel install``: see :mod:`ipyagent.kernel.kernelspec`."""

import sys

from .kernelspec import main

sys.exit(main())
