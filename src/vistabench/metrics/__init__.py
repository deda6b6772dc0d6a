"""Pure numpy metrics (no torch import)."""
