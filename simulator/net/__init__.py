"""The network model: links, connections, the server and service nodes, the
pipeline, and the data ports the stores see inside the simulation.

``links`` (latency, loss, timeouts, driver retries, fault clocks),
``connections`` (a pooled or multiplexed connection, replies matched in
order), ``server`` (the Redis node: its queue, persistence, restarts),
``pipeline`` (commands flushed only when a result is needed), ``service``
(a transactional service in the server's place), ``redis_port`` and
``service_port`` (what a store's data port is in the simulation). It builds
on ``engine`` and ``backends``, and reads distributions from ``scenario``.
"""
