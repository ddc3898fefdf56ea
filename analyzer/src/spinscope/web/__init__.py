"""The exporter's HTTP endpoint, as a web layer that knows nothing of the metrics it serves (as Prometheus's
exporter-toolkit): config.py reads the web configuration file (TLS, basic auth, headers, rate limit);
guard.py puts what the file asks of a request in front of a WSGI app; protocol.py speaks HTTP as Go's
net/http and exporter-toolkit do (paths, HEAD, errors, clients that go away); server.py binds and serves a
registry, bounded in connections and time. The metrics reach it through what the caller passes in: the
prometheus_client registry to serve and the name and help of the counter of refused requests.
May import: base.
"""
