import sys

from flowdeck.tui.cli import main

sys.exit(main())
