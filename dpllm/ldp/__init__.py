"""Local differential privacy: the client-side mechanisms and the ingest service.

``mechanisms`` (randomised response, unary encoding, their estimators), ``ingest`` (the
client that randomises on the user's device and the service that accepts, stores and
charges the reports).
"""
