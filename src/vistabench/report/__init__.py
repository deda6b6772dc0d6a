"""Views of the results store: tables, plots, the HTML report."""

from .html import Section, build_report, report_section
from .tables import Column, Table, register_table

__all__ = ["Section", "build_report", "report_section", "Column", "Table", "register_table"]
