"""`python -m unbounded` runs the command line."""

from unbounded.cli import main

main()
