//! Property tests of the load-balancer request built from a Service: any ports, node ports,
//! protocols and source ranges give a request or a clear refusal, never a panic, and absurd
//! port counts are refused before anything else is looked at.

use super::*;
use k8s_openapi::api::core::v1::{ServicePort as K8sPort, ServiceSpec};
use proptest::prelude::*;

fn port() -> impl Strategy<Value = K8sPort> {
    let protocol = prop::option::of(prop_oneof![
        prop::sample::select(vec!["TCP", "UDP", "SCTP"]).prop_map(str::to_owned),
        any::<String>(),
    ]);
    let number = prop_oneof![1i32..=65535, any::<i32>()];
    let node_port = prop::option::of(prop_oneof![30000i32..=32767, any::<i32>()]);
    (
        number,
        node_port,
        protocol,
        prop::option::of("[a-z0-9-]{0,15}"),
    )
        .prop_map(|(port, node_port, protocol, name)| K8sPort {
            port,
            node_port,
            protocol,
            name,
            ..K8sPort::default()
        })
}

fn service(ports: Vec<K8sPort>, ranges: Vec<String>, hc: Option<i32>) -> Service {
    let mut s = Service::default();
    s.metadata.name = Some("web".into());
    s.metadata.namespace = Some("shop".into());
    s.metadata.uid = Some("1234".into());
    s.spec = Some(ServiceSpec {
        type_: Some("LoadBalancer".into()),
        ports: Some(ports),
        load_balancer_source_ranges: Some(ranges),
        health_check_node_port: hc,
        ..ServiceSpec::default()
    });
    s
}

proptest! {
    #[test]
    fn requests_never_panic(
        ports in prop::collection::vec(port(), 0..120),
        ranges in prop::collection::vec(any::<String>(), 0..4),
        hc in prop::option::of(any::<i32>()),
    ) {
        let svc = service(ports.clone(), ranges.clone(), hc);
        match load_balancer_request(&svc, "c", vec![]) {
            Ok(r) => {
                prop_assert!(r.ports.len() <= MAX_PORTS);
                prop_assert_eq!(r.ports.len(), ports.len());
                for (got, raw) in r.ports.iter().zip(&ports) {
                    prop_assert_eq!(i32::from(got.port), raw.port);
                    prop_assert!(got.node_port > 0);
                }
                prop_assert_eq!(r.source_ranges, ranges);
                prop_assert!(r.health_check_node_port.is_none_or(|p| p > 0));
            }
            Err(RequestError::TooManyPorts(n, max)) => {
                prop_assert_eq!(n, ports.len());
                prop_assert!(n > max);
            }
            Err(e) => {
                prop_assert!(ports.len() <= MAX_PORTS);
                prop_assert!(!e.to_string().is_empty());
            }
        }
    }

    #[test]
    fn absurd_port_counts_are_refused_first(n in MAX_PORTS + 1..3000, bad in any::<bool>()) {
        // Whatever else is wrong with the ports, the count is what is reported.
        let ports = (0..n)
            .map(|i| K8sPort {
                port: i as i32,
                node_port: (!bad).then_some(30000),
                protocol: bad.then(|| "QUIC".to_string()),
                ..K8sPort::default()
            })
            .collect();
        prop_assert_eq!(
            load_balancer_request(&service(ports, vec![], None), "c", vec![]),
            Err(RequestError::TooManyPorts(n, MAX_PORTS))
        );
    }
}
