"""``spark``: the command line that starts every role."""
