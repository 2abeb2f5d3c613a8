"""The command line of zerobench's Python tools: bad input is one line on stderr, naming the
tool, and exit status 2, as every zerobench binary refuses it."""

import argparse
import sys


class Parser(argparse.ArgumentParser):
    def error(self, message):
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        sys.exit(2)
