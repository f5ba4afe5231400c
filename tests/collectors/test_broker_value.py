"""The Broker value: one or several node URIs parsed once, shown only redacted."""

from __future__ import annotations

import pytest

from flowdeck.collectors import Broker, BrokerUriError, redact
from flowdeck.engine.credentials import resolve_uri
from flowdeck.engine.errors import SpecError
from flowdeck.engine.spec import RunSpec

CLUSTER = "amqp://ops:s3,cr@t@n1:5672/%2F,amqp://ops:s3,cr@t@n2:5673/%2F,amqp://ops:s3,cr@t@n3"


def test_a_cluster_is_one_value_with_each_node_and_no_password_in_text() -> None:
    broker = Broker.parse(CLUSTER, management_url="http://n1:15672")
    assert [n.host for n in broker.nodes] == ["n1", "n2", "n3"]
    assert [n.effective_port for n in broker.nodes] == [5672, 5673, 5672]
    assert {n.secret for n in broker.nodes} == {"s3,cr@t"}  # a raw ',' and '@' kept
    assert broker.redacted == (
        "amqp://ops:***@n1:5672/%2F,amqp://ops:***@n2:5673/%2F,amqp://ops:***@n3"
    )
    assert str(broker) == broker.redacted
    for text in (repr(broker), str(broker), broker.address, redact(CLUSTER)):
        assert "s3,cr" not in text, text
    assert broker.address == "n1:5672 vhost '/' (+2 more nodes)"
    assert broker.usual_management_url == "http://n1:15672"
    assert Broker.parse(broker.uri_list).nodes == broker.nodes  # the connect form reads back


def test_clients_are_spread_round_robin_over_the_nodes() -> None:
    broker = Broker.parse(CLUSTER)
    hosts = [Broker.parse(broker.uri_for(client)).nodes[0].host for client in range(7)]
    assert hosts == ["n1", "n2", "n3", "n1", "n2", "n3", "n1"]
    assert Broker.parse("amqp://localhost").uri_for(5) == "amqp://localhost"


def test_the_management_api_defaults_to_node_one_and_its_logins() -> None:
    plain = Broker.parse("amqp://u:p@h1:5672/v,amqp://u:p@h2:5672/v")
    assert plain.usual_management_url == "http://h1:15672"
    assert plain.management_login == ("u", "p")
    assert plain.vhost == "v"
    tls = Broker.parse("amqps://h1", management_user="admin", management_password="x")
    assert tls.usual_management_url == "https://h1:15671"
    assert tls.management_login == ("admin", "x")
    assert "'x'" not in repr(tls)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("amqp://u:p@h1/a,amqp://u:p@h2/b", "must share vhost, user and TLS"),
        ("amqp://u:p@h1,amqps://u:p@h2", "must share vhost, user and TLS"),
        ("amqp://u:p@h1,amqp://v:p@h2", "must share vhost, user and TLS"),
        ("amqp://u:p@h1,http://h2", "uri must start with amqp://"),
        ("", "no broker to run against"),
    ],
)
def test_nodes_that_are_not_one_broker_are_refused_in_one_line(text: str, says: str) -> None:
    with pytest.raises(BrokerUriError) as caught:
        Broker.parse(text)
    assert says in caught.value.message
    assert "\n" not in caught.value.message
    assert ":p@" not in caught.value.message


def test_a_spec_takes_several_uris_and_the_password_applies_to_every_node() -> None:
    spec = RunSpec(uri="amqp://u:old@h1:5672/%2F,amqp://u:old@h2:5672/%2F")
    assert spec.redacted()["uri"] == "amqp://u:***@h1:5672/%2F,amqp://u:***@h2:5672/%2F"
    resolved = resolve_uri(spec.uri, environ={"FLOWDECK_PASSWORD": "new"})
    assert [n.secret for n in Broker.parse(resolved).nodes] == ["new", "new"]
    with pytest.raises(SpecError, match="must share vhost"):
        RunSpec(uri="amqp://h1/a,amqp://h2/b")
