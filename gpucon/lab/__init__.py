"""The local lab: a reference scheduler, KServe v2 backend servers and a traffic generator.

These are real network services on loopback that drive gpucon's integration tests and let a
newcomer see the console on live Redis, HTTP backends and Prometheus (``gpucon lab``).
"""
