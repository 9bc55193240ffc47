import sys

from storbench.cli import main

sys.exit(main())
