"""Figure builders: each takes the DataFrame an analysis returned and draws it (Plotly).

Builders never compute: everything they show is a column of their input.
"""
