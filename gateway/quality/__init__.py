"""Quality beside cost: what a request's answer tells about its quality without another
model call (`signals`), and what an app says about it afterwards (`feedback`).

Pure: parsing and bounding the feedback an app sends, reading the signals off an answer.
The request path records the signals on the ledger row; the feedback route stores what
the app says (`db.quality`). See docs/QUALITY.md.
"""
