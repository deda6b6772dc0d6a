"""Exception types raised on bad user input.

Both subclass the builtin they refine, so ``except ValueError`` keeps working; the CLI catches
:class:`InputError` and prints its message as one line.
"""


class InputError(ValueError):
    """Bad user input: the message names the argument, what was expected and what came in."""


class InputTypeError(InputError, TypeError):
    """Input of the wrong type."""
