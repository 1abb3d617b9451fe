import sys

from streamcal.cli import main

sys.exit(main())
