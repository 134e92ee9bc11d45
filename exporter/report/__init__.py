"""The fleet report (`ridgeline report`): where a range's GPU-hours went, which wall each group hit,
and what the levers would give back.

    model.py        the pure part: Usage records in, the report document (JSON) out — regime
                    GPU-hours, the roofline points, the savings bounds; no HTTP, no Prometheus
    series.py       the recorded and raw series the Prometheus input reads, named in one place
    promql.py       the PromQL the Prometheus input sends (pure text building)
    prometheus.py   the Prometheus-compatible HTTP query client and the query plan -> Usage
    replay.py       the replay input: a recorded trace through the daemon's own sampler -> Usage
    render.py       the HTML page with inline SVG charts (matplotlib)

docs/report.md describes the command, the formulas and the JSON schema.
"""
