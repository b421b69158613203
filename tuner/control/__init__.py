"""The control plane: how a running engine is steered, from any UI.

models      the requests and states, typed once (pydantic; no engine, no web, no UI)
answers     what the operations answer besides those and the snapshot, typed once
errors      the control plane's errors and the HTTP status each user error is answered with
controller  the Controller over a Session: settings changes, presets, budgets, jobs
slot        the one background job at a time (an A/B or a tune), the live session paused
ab, tune    those jobs
report      an A/B's result as lines of text (`tuner ab`, the terminal UI)
api         the operations, each declared once as a `Backend` method with its REST route
embedded    a Backend over a Controller in this process
remote      a Backend over a `tuner serve` elsewhere (REST and the snapshot websocket)
compose     settings -> session -> Controller, built in one place (serve, tui, run, ...)

Importing models, answers, errors, report, api or remote loads no engine (torch): the
terminal UI connected to a server needs none.
"""
