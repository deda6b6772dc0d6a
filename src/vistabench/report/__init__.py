"""Views of the results store: tables, plots, the HTML report."""

from .html import Section, build_report
from .tables import Column, Table

__all__ = ["Section", "build_report", "Column", "Table"]
