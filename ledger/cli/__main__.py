"""``python -m ledger.cli``: the ``ralph-ledger`` command."""

import sys

from ledger.cli import main

if __name__ == "__main__":
    sys.exit(main())
