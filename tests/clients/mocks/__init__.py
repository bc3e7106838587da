"""Local mock model APIs for the real agent CLIs: standard library only, on 127.0.0.1 and a free port.

``base`` holds what every protocol shares (scripted turns, the request log, the server); one module per
wire protocol turns a scripted turn into the stream the real API sends.
"""
