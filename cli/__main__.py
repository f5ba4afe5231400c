import sys

from flowdeck.cli import main

sys.exit(main())
