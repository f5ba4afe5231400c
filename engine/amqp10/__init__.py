"""Clients of AMQP 1.0 (python-qpid-proton), to classic and quorum queues."""
