"""``python -m hta.synthetic``."""

import sys

from hta.synthetic.cli import main

sys.exit(main())
