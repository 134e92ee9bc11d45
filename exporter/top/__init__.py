"""`ridgeline top`: a terminal view of one or more nodes, a client of their GET /classify."""
