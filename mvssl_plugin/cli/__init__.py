"""The entry points (``main_*.py``, ``mvssl-*`` console scripts): parse, call a flow, report."""
