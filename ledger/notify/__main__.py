"""``python -m ledger.notify``: the detached sender (``ledger.notify.send``)."""

import sys

from ledger.notify.send import main

if __name__ == "__main__":
    sys.exit(main())
