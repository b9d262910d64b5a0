"""`python -m torch_diode`: the `diode` command (torch_diode/cli.py)."""
import sys

from .cli import main

sys.exit(main())
