"""The flag helpers commands share, one module a concern; commands import the one they use and
never each other (docs/design.md, "CLI"), so one definition of each flag serves every command.

errors (UserError), variables (RIDGELINE_* names and values), renames (deprecated spellings),
flags (add_flag, add_spec), log_flags, sources (serve's and record's source flags), inference
(serve's and report's inference flags), listen (where serve listens), collectors (--collector.X).
"""
