//! EC2 route tables as the provider-neutral [`RouteTable`]: what each route points at.

use aws_sdk_ec2::types as ec2;
use stratus_cloud::{Cidr, NextHop, Route, RouteTable, RouteTarget};

/// The neutral view of one table; `None` without an ID. Routes whose destination is not a CIDR
/// (prefix lists) are left out.
pub fn route_table(table: &ec2::RouteTable) -> Option<RouteTable> {
    Some(RouteTable {
        id: table.route_table_id()?.to_string(),
        routes: table.routes().iter().filter_map(route).collect(),
    })
}

fn route(r: &ec2::Route) -> Option<Route> {
    let destination = r
        .destination_cidr_block()
        .or(r.destination_ipv6_cidr_block())?;
    Some(Route {
        destination: Cidr::parse(destination).ok()?,
        next_hop: next_hop(r),
    })
}

/// The gateway-like target of a route (never an instance), if any.
fn gateway(r: &ec2::Route) -> Option<&str> {
    r.gateway_id()
        .or(r.nat_gateway_id())
        .or(r.transit_gateway_id())
        .or(r.vpc_peering_connection_id())
        .or(r.egress_only_internet_gateway_id())
        .or(r.carrier_gateway_id())
        .or(r.local_gateway_id())
        .or(r.core_network_arn())
}

fn next_hop(r: &ec2::Route) -> NextHop {
    let blackhole = r.state() == Some(&ec2::RouteState::Blackhole);
    match (gateway(r), r.instance_id()) {
        (Some(g), _) if blackhole => NextHop::Other(format!("{g} (blackhole)")),
        (Some(g), _) => NextHop::Other(g.to_string()),
        // A route to a terminated instance: AWS keeps it as a blackhole.
        (None, _) if blackhole => NextHop::Blackhole,
        (None, Some(instance)) => NextHop::Target(RouteTarget(instance.to_string())),
        (None, None) => NextHop::Other(
            r.network_interface_id()
                .map(str::to_string)
                .unwrap_or_else(|| "an unknown target".to_string()),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(routes: Vec<ec2::Route>) -> RouteTable {
        route_table(
            &ec2::RouteTable::builder()
                .route_table_id("rtb-1")
                .set_routes(Some(routes))
                .build(),
        )
        .unwrap()
    }

    fn v4(dest: &str) -> aws_sdk_ec2::types::builders::RouteBuilder {
        ec2::Route::builder()
            .destination_cidr_block(dest)
            .state(ec2::RouteState::Active)
    }

    #[test]
    fn classifies_next_hops() {
        let t = table(vec![
            v4("10.0.0.0/16").gateway_id("local").build(),
            v4("0.0.0.0/0").gateway_id("igw-1").build(),
            v4("10.244.1.0/24")
                .instance_id("i-1")
                .network_interface_id("eni-1")
                .build(),
            ec2::Route::builder()
                .destination_ipv6_cidr_block("FD00:10:244:1::/64")
                .instance_id("i-2")
                .build(),
            v4("10.244.2.0/24")
                .state(ec2::RouteState::Blackhole)
                .network_interface_id("eni-2")
                .build(),
            v4("10.244.3.0/24")
                .state(ec2::RouteState::Blackhole)
                .nat_gateway_id("nat-1")
                .build(),
            v4("10.244.4.0/24").network_interface_id("eni-4").build(),
            ec2::Route::builder()
                .destination_prefix_list_id("pl-1")
                .gateway_id("vpce-1")
                .build(),
            v4("not-a-cidr").instance_id("i-3").build(),
        ]);
        assert_eq!(t.id, "rtb-1");
        let hops: Vec<(String, NextHop)> = t
            .routes
            .iter()
            .map(|r| (r.destination.to_string(), r.next_hop.clone()))
            .collect();
        assert_eq!(
            hops,
            vec![
                ("10.0.0.0/16".into(), NextHop::Other("local".into())),
                ("0.0.0.0/0".into(), NextHop::Other("igw-1".into())),
                (
                    "10.244.1.0/24".into(),
                    NextHop::Target(RouteTarget("i-1".into()))
                ),
                (
                    "fd00:10:244:1::/64".into(),
                    NextHop::Target(RouteTarget("i-2".into()))
                ),
                ("10.244.2.0/24".into(), NextHop::Blackhole),
                (
                    "10.244.3.0/24".into(),
                    NextHop::Other("nat-1 (blackhole)".into())
                ),
                ("10.244.4.0/24".into(), NextHop::Other("eni-4".into())),
            ]
        );
    }
}
