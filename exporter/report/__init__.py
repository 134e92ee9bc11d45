"""The fleet report (`ridgeline report`): where a range's GPU-hours went, which wall each group hit,
and what the levers would give back. Its modules are listed in docs/design.md §1; docs/report.md
describes the command, the formulas and the JSON schema.
"""
