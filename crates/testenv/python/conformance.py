"""Drives the Stratus OpenStack simulators with the official openstacksdk.

Run by crates/testenv/tests/openstack.rs with the OS_* variables of the test cloud's CCM user.
Any wire-format mistake of a simulator (paths, field names, paging links, statuses, error
bodies, version discovery) makes a step fail; the script prints one JSON line per step and
exits non-zero naming the first failure.
"""

import json
import sys
import time

import openstack
from openstack import exceptions

STEPS = []


def step(name):
    def wrap(fn):
        STEPS.append((name, fn))
        return fn
    return wrap


def wait(what, check, timeout=30):
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for " + what)
        time.sleep(0.1)


CTX = {}


@step("flavors")
def flavors(conn):
    names = [f.name for f in conn.compute.flavors(details=True)]
    assert "m1.small" in names, names
    small = conn.compute.find_flavor("m1.small")
    assert small.vcpus == 1 and small.ram == 2048, small
    CTX["flavor"] = small
    return names


@step("images")
def images(conn):
    found = list(conn.image.images())
    assert found, "no images"
    CTX["image"] = found[0]
    assert found[0].status == "active", found[0].status
    return [i.name for i in found]


@step("networks")
def networks(conn):
    internal = conn.network.find_network("stratus-internal")
    public = conn.network.find_network("public")
    assert internal is not None and public is not None
    assert public.is_router_external, public
    subnets = list(conn.network.subnets(network_id=internal.id))
    assert {s.ip_version for s in subnets} == {4, 6}, subnets
    CTX["internal"], CTX["public"] = internal, public
    return [internal.id, public.id]


@step("availability zones")
def zones(conn):
    names = [z.name for z in conn.compute.availability_zones()]
    assert "nova" in names, names
    return names


@step("create port")
def port(conn):
    p = conn.network.create_port(network_id=CTX["internal"].id, name="conformance-port")
    assert len(p.fixed_ips) == 2, p.fixed_ips
    listed = list(conn.network.ports(name="conformance-port"))
    assert [x.id for x in listed] == [p.id], listed
    by_ip = list(conn.network.ports(fixed_ips=["ip_address=" + p.fixed_ips[0]["ip_address"]]))
    assert [x.id for x in by_ip] == [p.id], by_ip
    CTX["port"] = p
    return p.fixed_ips


@step("create servers")
def servers(conn):
    made = []
    for i in range(3):
        s = conn.compute.create_server(
            name="conformance-%d" % i,
            flavor_id=CTX["flavor"].id,
            image_id=CTX["image"].id,
            networks=[{"uuid": CTX["internal"].id}],
        )
        made.append(s)
    port_server = conn.compute.create_server(
        name="conformance-port-server",
        flavor_id=CTX["flavor"].id,
        image_id=CTX["image"].id,
        networks=[{"port": CTX["port"].id}],
    )
    made.append(port_server)
    for s in made:
        s = conn.compute.wait_for_server(s, status="ACTIVE", wait=30, interval=0.2)
        assert s.flavor.original_name == "m1.small", s.flavor
        assert s.availability_zone == "nova", s.availability_zone
    CTX["servers"] = made
    return [s.id for s in made]


@step("list servers with paging")
def paging(conn):
    # limit=1 makes the SDK follow servers_links page by page.
    listed = [s.name for s in conn.compute.servers(details=True, limit=1)]
    for s in CTX["servers"]:
        assert s.name in listed, (s.name, listed)
    assert len(listed) == len(set(listed)), listed
    named = list(conn.compute.servers(name="^conformance-1$"))
    assert [s.name for s in named] == ["conformance-1"], named
    return len(listed)


@step("floating ip")
def floating(conn):
    server = CTX["servers"][0]
    ports = list(conn.network.ports(device_id=server.id))
    assert len(ports) == 1, ports
    fip = conn.network.create_ip(floating_network_id=CTX["public"].id, port_id=ports[0].id)
    assert fip.floating_ip_address and fip.port_id == ports[0].id, fip
    s = conn.compute.get_server(server.id)
    kinds = {a["OS-EXT-IPS:type"] for net in s.addresses.values() for a in net}
    assert kinds == {"fixed", "floating"}, s.addresses
    conn.network.update_ip(fip, port_id=None)
    s = conn.compute.get_server(server.id)
    kinds = {a["OS-EXT-IPS:type"] for net in s.addresses.values() for a in net}
    assert kinds == {"fixed"}, s.addresses
    conn.network.delete_ip(fip)
    return fip.floating_ip_address


@step("stop and start")
def stop_start(conn):
    server = CTX["servers"][1]
    conn.compute.stop_server(server)
    conn.compute.wait_for_server(server, status="SHUTOFF", wait=30, interval=0.2)
    conn.compute.start_server(server)
    conn.compute.wait_for_server(server, status="ACTIVE", wait=30, interval=0.2)
    try:
        conn.compute.start_server(server)
        raise AssertionError("starting an ACTIVE server must conflict")
    except exceptions.ConflictException:
        pass
    return "ok"


@step("server groups")
def groups(conn):
    g = conn.compute.create_server_group(name="conformance", policy="anti-affinity")
    assert g.policy == "anti-affinity" or g.policies == ["anti-affinity"], g
    assert g.id in [x.id for x in conn.compute.server_groups()]
    conn.compute.delete_server_group(g)
    return g.id


@step("volumes")
def volumes(conn):
    v = conn.block_storage.create_volume(size=1, name="conformance-volume")
    v = conn.block_storage.wait_for_status(v, status="available", wait=30, interval=0.2)
    assert v.size == 1, v
    assert "conformance-volume" in [x.name for x in conn.block_storage.volumes()]
    types = [t.name for t in conn.block_storage.types()]
    assert "__DEFAULT__" in types, types
    conn.block_storage.delete_volume(v)
    conn.block_storage.wait_for_delete(v, wait=30, interval=0.2)
    return v.id


@step("volume attachments")
def volume_attachments(conn):
    bs, compute = conn.block_storage, conn.compute
    a, b = CTX["servers"][0], CTX["servers"][1]
    v = bs.create_volume(size=1, name="conformance-attach")
    v = bs.wait_for_status(v, status="available", wait=30, interval=0.2)
    made = compute.create_volume_attachment(a, volume=v)
    assert made.volume_id == v.id and made.device == "/dev/vdb", made
    try:
        compute.create_volume_attachment(b, volume=v)
        raise AssertionError("a second attach of a single-attach volume must be refused")
    except exceptions.BadRequestException as e:
        assert "status must be available" in str(e), str(e)
    v = bs.wait_for_status(v, status="in-use", wait=30, interval=0.2)
    assert [x["server_id"] for x in v.attachments] == [a.id], v.attachments
    assert [x.volume_id for x in compute.volume_attachments(a)] == [v.id]
    assert compute.get_volume_attachment(a, v).device == "/dev/vdb"
    assert v.id in [x["id"] for x in compute.get_server(a.id).attached_volumes]
    try:
        bs.delete_volume(v)
        raise AssertionError("deleting an in-use volume must be refused")
    except exceptions.BadRequestException:
        pass
    bs.extend_volume(v, 3)
    assert bs.get_volume(v.id).status == "extending"
    v = wait("extended", lambda: (lambda x: x if x.size == 3 and x.status == "in-use" else None)(bs.get_volume(v.id)))
    compute.delete_volume_attachment(a, v)
    v = bs.wait_for_status(v, status="available", wait=30, interval=0.2)
    assert v.attachments == [], v.attachments
    assert list(compute.volume_attachments(a)) == []
    try:
        compute.delete_volume_attachment(a, v, ignore_missing=False)
        raise AssertionError("detaching a detached volume must be NotFound")
    except exceptions.NotFoundException:
        pass

    shared = bs.create_volume(size=1, name="conformance-shared", volume_type="multiattach")
    shared = bs.wait_for_status(shared, status="available", wait=30, interval=0.2)
    assert shared.is_multiattach, shared
    compute.create_volume_attachment(a, volume=shared)
    shared = bs.wait_for_status(shared, status="in-use", wait=30, interval=0.2)
    compute.create_volume_attachment(b, volume=shared)
    shared = wait("two attachments", lambda: (lambda x: x if len(x.attachments) == 2 and x.status == "in-use" else None)(bs.get_volume(shared.id)))
    assert sorted(x["server_id"] for x in shared.attachments) == sorted([a.id, b.id]), shared.attachments
    compute.delete_volume_attachment(b, shared)
    wait("one attachment left", lambda: len(bs.get_volume(shared.id).attachments) == 1)
    assert bs.get_volume(shared.id).status == "in-use"
    # Left attached to server a: deleting the server detaches it (checked in "delete servers").
    CTX["attached"] = shared
    bs.delete_volume(v)
    bs.wait_for_delete(v, wait=30, interval=0.2)
    return [v.id, shared.id]


@step("load balancers")
def load_balancers(conn):
    subnet = next(s for s in conn.network.subnets(network_id=CTX["internal"].id) if s.ip_version == 4)
    lb = conn.load_balancer.create_load_balancer(name="conformance-lb", vip_subnet_id=subnet.id)
    deadline = time.monotonic() + 30
    while conn.load_balancer.get_load_balancer(lb.id).provisioning_status != "ACTIVE":
        assert time.monotonic() < deadline, "load balancer never ACTIVE"
        time.sleep(0.2)
    assert lb.id in [x.id for x in conn.load_balancer.load_balancers()]
    conn.load_balancer.delete_load_balancer(lb)
    wait("load balancer deleted", lambda: conn.load_balancer.find_load_balancer(lb.id) is None)
    return lb.vip_address


@step("load balancer tree")
def load_balancer_tree(conn):
    lbs = conn.load_balancer
    subnet = next(s for s in conn.network.subnets(network_id=CTX["internal"].id) if s.ip_version == 4)
    flavor = next(iter(lbs.flavors()))
    zone = next(iter(lbs.availability_zones()))

    def active(lb_id):
        wait("load balancer ACTIVE", lambda: lbs.get_load_balancer(lb_id).provisioning_status == "ACTIVE")

    lb = lbs.create_load_balancer(name="conformance-tree", vip_subnet_id=subnet.id, flavor_id=flavor.id,
                                  availability_zone=zone.name, tags=["conformance-tree"])
    active(lb.id)
    listener = lbs.create_listener(name="listener_0", loadbalancer_id=lb.id, protocol="TCP", protocol_port=80,
                                   timeout_client_data=60000, allowed_cidrs=["10.0.0.0/8"])
    try:
        lbs.create_listener(loadbalancer_id=lb.id, protocol="TCP", protocol_port=81)
        raise AssertionError("a change while PENDING_UPDATE must be refused")
    except exceptions.ConflictException:
        pass
    active(lb.id)
    pool = lbs.create_pool(name="pool_0", listener_id=listener.id, protocol="TCP", lb_algorithm="ROUND_ROBIN")
    active(lb.id)
    member = lbs.create_member(pool, address="10.0.0.50", protocol_port=30080, subnet_id=subnet.id, name="node-a")
    active(lb.id)
    monitor = lbs.create_health_monitor(pool_id=pool.id, type="TCP", delay=5, timeout=3, max_retries=1)
    active(lb.id)
    answer = lbs.put("/lbaas/pools/%s/members" % pool.id, json={"members": [
        {"address": "10.0.0.50", "protocol_port": 30080, "name": "node-a"},
        {"address": "10.0.0.51", "protocol_port": 30080, "name": "node-b"}]})
    assert answer.status_code == 202, answer.status_code
    active(lb.id)
    addresses = sorted(m.address for m in lbs.members(pool))
    assert addresses == ["10.0.0.50", "10.0.0.51"], addresses
    assert lbs.get_health_monitor(monitor.id).pool_id == pool.id
    assert [x.id for x in lbs.listeners(loadbalancer_id=lb.id)] == [listener.id]
    assert lbs.get_listener(listener.id).default_pool_id == pool.id
    assert lbs.get_load_balancer(lb.id).listeners[0]["id"] == listener.id
    lbs.delete_member(member, pool)
    active(lb.id)
    assert [m.address for m in lbs.members(pool)] == ["10.0.0.51"]
    lbs.delete_load_balancer(lb, cascade=True)
    wait("cascade delete", lambda: lbs.find_load_balancer(lb.id) is None)
    assert not list(lbs.pools()) and not list(lbs.listeners()), "children left"
    return "ok"


@step("security groups")
def security_groups(conn):
    group = conn.network.create_security_group(name="lb-sg-conformance", description="conformance")
    rule = conn.network.create_security_group_rule(security_group_id=group.id, direction="ingress",
                                                   protocol="tcp", port_range_min=30080, port_range_max=30080,
                                                   remote_ip_prefix="0.0.0.0/0", ethertype="IPv4")
    assert rule.id in [r.id for r in conn.network.security_group_rules(security_group_id=group.id)]
    conn.network.delete_security_group_rule(rule)
    conn.network.delete_security_group(group)
    assert conn.network.find_security_group(group.id) is None
    return "ok"


@step("router extra routes")
def extra_routes(conn):
    router = conn.network.find_router("stratus-router")
    a = {"destination": "10.244.1.0/24", "nexthop": "10.0.0.10"}
    b = {"destination": "10.244.2.0/24", "nexthop": "10.0.0.11"}
    conn.network.add_extra_routes_to_router(router, body={"router": {"routes": [a, b]}})
    conn.network.add_extra_routes_to_router(router, body={"router": {"routes": [a]}})
    routes = conn.network.get_router(router.id).routes
    assert sorted(r["destination"] for r in routes) == ["10.244.1.0/24", "10.244.2.0/24"], routes
    conn.network.remove_extra_routes_from_router(router, body={"router": {"routes": [a, b]}})
    assert conn.network.get_router(router.id).routes == []
    return "ok"


@step("not found")
def not_found(conn):
    try:
        conn.compute.get_server("00000000-0000-0000-0000-000000000000")
        raise AssertionError("a missing server must be NotFound")
    except exceptions.NotFoundException as e:
        assert "could not be found" in str(e), str(e)
    return "ok"


@step("delete servers")
def delete(conn):
    for s in CTX["servers"]:
        conn.compute.delete_server(s)
    for s in CTX["servers"]:
        conn.compute.wait_for_delete(s, wait=30, interval=0.2)
    conn.network.delete_port(CTX["port"])
    left = [s.name for s in conn.compute.servers() if s.name.startswith("conformance")]
    assert not left, left
    shared = conn.block_storage.wait_for_status(CTX["attached"], status="available", wait=30, interval=0.2)
    assert shared.attachments == [], shared.attachments
    conn.block_storage.delete_volume(shared)
    conn.block_storage.wait_for_delete(shared, wait=30, interval=0.2)
    return "ok"


def main():
    conn = openstack.connect()
    for name, fn in STEPS:
        try:
            result = fn(conn)
        except Exception as e:  # noqa: BLE001 - every failure is reported
            print(json.dumps({"step": name, "ok": False, "error": "%s: %s" % (type(e).__name__, e)}))
            return 1
        print(json.dumps({"step": name, "ok": True, "result": result}, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
