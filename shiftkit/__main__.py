import sys

from shiftkit.cli import main

sys.exit(main())
