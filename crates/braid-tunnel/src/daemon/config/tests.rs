use super::*;

const KEY_A: &str = "yAnz5TF+lXXJte14tji3zlMNq+hd2rYUIgJBgB3fBmk=";
const KEY_B: &str = "xTIBA5rboUvnH4htodjb6e697QjLERt1NAB4mZqp8Dg=";

fn client_toml() -> String {
    format!(
        r#"
private_key = "{KEY_A}"
gateway_public_key = "{KEY_B}"
gateway = "192.0.2.1:7000"
[tun]
address = "10.200.0.2/24"
routes = ["10.0.9.0/24"]
[[link]]
name = "eth0"
[[link]]
name = "wwan0"
backup = true
"#
    )
}

#[test]
fn a_minimal_client_config_loads_with_defaults() {
    let c = ClientConfig::parse(&client_toml(), []).unwrap();
    assert_eq!(c.links.len(), 2);
    assert_eq!(c.tun.mtu, 1400);
    assert_eq!(c.connection.scheduler, "arrival");
    assert!(c.connection.linux_recovery);
    assert!(c.connection.adaptive_reordering);
    assert_eq!(c.link_gateway(1), "192.0.2.1:7000".parse().unwrap());
    // A backup link makes `auto` the backup mode.
    assert_eq!(c.pm_config().unwrap().mode, braid_pm::Mode::Backup);
    // The core datagram leaves room for UDP/IPv4, the secure header and tag, the id.
    let core = c.tunnel_config().unwrap().core;
    assert_eq!(core.max_datagram_size, 1472 - 29 - 4);
    assert!(core.linux_recovery);
    assert!(core.adaptive_reordering);
    let env = [("BRAID_TUNNEL_CONNECTION_LINUX_RECOVERY", "false")]
        .map(|(k, v)| (k.to_string(), v.to_string()));
    let stock = ClientConfig::parse(&client_toml(), env).unwrap();
    assert!(!stock.tunnel_config().unwrap().core.linux_recovery);
}

#[test]
fn environment_overrides_keys_in_tables_arrays_and_top_level() {
    let env = [
        ("BRAID_TUNNEL_CONNECTION_SCHEDULER", "redundant"),
        ("BRAID_TUNNEL_TUN_MTU", "1300"),
        ("BRAID_TUNNEL_LINK_1_BACKUP", "false"),
        ("BRAID_TUNNEL_GATEWAY", "192.0.2.9:7001"),
        ("OTHER_VARIABLE", "ignored"),
    ]
    .map(|(k, v)| (k.to_string(), v.to_string()));
    let c = ClientConfig::parse(&client_toml(), env).unwrap();
    assert_eq!(c.connection.scheduler, "redundant");
    assert_eq!(c.tun.mtu, 1300);
    assert!(!c.links[1].backup);
    assert_eq!(c.gateway, Some("192.0.2.9:7001".parse().unwrap()));
}

#[test]
fn environment_overrides_keys_of_the_path_managers_inner_tables() {
    let env = [
        ("BRAID_TUNNEL_PM_MODE", "cross-cap"),
        ("BRAID_TUNNEL_LINK_0_THRESHOLD_DBM", "-75.0"),
        ("BRAID_TUNNEL_PM_CAPACITY_HEADROOM", "0.8"),
        ("BRAID_TUNNEL_PM_CAPACITY_SAMPLE_MS", "500"),
        ("BRAID_TUNNEL_PM_HMM_WINDOW", "7"),
    ]
    .map(|(k, v)| (k.to_string(), v.to_string()));
    let c = ClientConfig::parse(&client_toml(), env).unwrap();
    assert_eq!(c.pm.mode, "cross-cap");
    let cap =
        c.pm.capacity
            .as_ref()
            .expect("[pm.capacity] from the environment");
    assert_eq!(cap.headroom, Some(0.8));
    assert_eq!(cap.sample_ms, Some(500));
    assert_eq!(c.pm.hmm.as_ref().expect("[pm.hmm]").window, Some(7));
    // An unknown key inside them is named with its whole path.
    let env =
        [("BRAID_TUNNEL_PM_CAPACITY_HEADRUM", "0.8")].map(|(k, v)| (k.to_string(), v.to_string()));
    let e = ClientConfig::parse(&client_toml(), env).unwrap_err().0;
    assert!(e.contains("pm.capacity.headrum"), "{e}");
}

#[test]
fn timers_that_would_flood_the_links_or_drop_a_healthy_peer_are_refused() {
    let with = |top: &str| {
        let text = client_toml().replace("[tun]", &format!("{top}\n[tun]"));
        ClientConfig::parse(&text, []).map(|_| ()).map_err(|e| e.0)
    };
    let e = with("keepalive_ms = 0").unwrap_err();
    assert!(
        e.starts_with("keepalive_ms: 0 out of range: allowed 10.."),
        "{e}"
    );
    let e = with("dead_after_ms = 0").unwrap_err();
    assert!(
        e.starts_with("dead_after_ms: 0 out of range: allowed 100.."),
        "{e}"
    );
    let e = with("keepalive_ms = 2000\ndead_after_ms = 1500").unwrap_err();
    assert!(
        e.starts_with("dead_after_ms (1500) must be longer than keepalive_ms (2000)"),
        "{e}"
    );
    with("keepalive_ms = 10\ndead_after_ms = 100").unwrap();
    let gw = |timeout: &str| {
        GatewayConfig::parse(
            &format!(
                "private_key = \"{KEY_B}\"\nlisten = [\"0.0.0.0:7000\"]\nclient_timeout_ms = {timeout}\n[tun]\naddress = \"10.200.0.1/24\"\n"
            ),
            [],
        )
        .map(|_| ())
        .map_err(|e| e.0)
    };
    let e = gw("0").unwrap_err();
    assert!(
        e.starts_with("client_timeout_ms: 0 out of range: allowed 100.."),
        "{e}"
    );
    gw("3000").unwrap();
}

#[test]
fn errors_are_one_line_and_name_the_key() {
    let bad = client_toml().replace("[tun]", "[tun]\nmtuu = 3");
    let e = ClientConfig::parse(&bad, []).unwrap_err().0;
    assert!(e.contains("tun") && e.contains("mtuu"), "{e}");
    assert!(!e.contains('\n'), "{e}");
    let env = [(
        "BRAID_TUNNEL_CONNECTION_SCHEDULER".to_string(),
        "fastest".to_string(),
    )];
    let e = ClientConfig::parse(&client_toml(), env).unwrap_err().0;
    assert!(
        e.starts_with("connection.scheduler: unknown scheduler `fastest`"),
        "{e}"
    );
    let env = [("BRAID_TUNNEL_TUN_MTU".to_string(), "big".to_string())];
    let e = ClientConfig::parse(&client_toml(), env).unwrap_err().0;
    assert!(e.contains("tun.mtu"), "{e}");
    let e = ClientConfig::parse(&client_toml().replace(KEY_B, "short"), [])
        .unwrap_err()
        .0;
    assert!(e.starts_with("gateway_public_key:"), "{e}");
}

#[test]
fn gateway_config_checks_clients() {
    let text = format!(
        r#"
private_key = "{KEY_B}"
listen = ["0.0.0.0:7000"]
[tun]
address = "10.200.0.1/24"
[[client]]
public_key = "{KEY_A}"
allowed_ips = ["10.200.0.2/32"]
"#
    );
    let g = GatewayConfig::parse(&text, []).unwrap();
    assert_eq!(g.clients.len(), 1);
    let e = GatewayConfig::parse(&text.replace("10.200.0.2/32", "10.200.0.2/33"), [])
        .unwrap_err()
        .0;
    assert!(e.starts_with("client[0].allowed_ips:"), "{e}");
}

#[test]
fn prefixes_contain_their_addresses_only() {
    let p = Prefix::parse("10.200.0.0/24").unwrap();
    assert!(p.contains("10.200.0.77".parse().unwrap()));
    assert!(!p.contains("10.200.1.1".parse().unwrap()));
    assert!(!p.contains("fd00::1".parse().unwrap()));
    let h = Prefix::parse("fd00::2").unwrap();
    assert_eq!(h.len, 128);
    assert!(h.contains("fd00::2".parse().unwrap()));
    assert!(
        Prefix::parse("0.0.0.0/0")
            .unwrap()
            .contains("1.2.3.4".parse().unwrap())
    );
}

#[test]
fn a_key_file_is_the_bare_key_or_what_braid_keygen_prints() {
    let (private, public) = crate::daemon::keygen();
    let want = PrivateKey::from_base64(&private).unwrap().to_base64();
    let read = |text: &str| key_file(text).map(|k| k.to_base64());
    assert_eq!(read(&format!("{private}\n")).unwrap(), want);
    let printed = format!("private_key = \"{private}\"\npublic_key = \"{public}\"\n");
    assert_eq!(read(&printed).unwrap(), want);
    assert_eq!(read(&format!("private_key = \"{private}\"")).unwrap(), want);
    // Another key's public half, a typo, junk: one-line errors.
    let other = printed.replace(&public, KEY_B);
    let e = read(&other).unwrap_err();
    assert!(e.contains("is not the private key's"), "{e}");
    for bad in [
        printed.replace("public_key", "pubkey"),
        "private_key = 3".to_string(),
        "private_key = \"short\"".to_string(),
        String::new(),
    ] {
        let e = read(&bad).unwrap_err();
        assert!(!e.contains('\n'), "{e}");
    }
}

#[test]
fn datagram_transport_ratios_and_classes() {
    let datagram = client_toml().replace(
        "[tun]",
        "transport = \"datagram\"\n[datagram]\nratio = \"2:1\"\nofo_timeout_us = 5000\n[tun]",
    );
    let c = ClientConfig::parse(&datagram, []).unwrap();
    let t = c.tunnel_config().unwrap();
    assert_eq!(t.classes.default, Carrier::PerPacket);
    assert_eq!(t.per_packet.sender.weights, Weights::Fixed(vec![2, 1]));
    assert_eq!(
        t.per_packet.receiver.reorder.ofo_timeout,
        Duration::from_millis(5)
    );
    // The default MTU (1400) fits one datagram with IPv4 links (1422).
    assert!(t.classes.rules.is_empty());
    // Unset: equal weights for however many links.
    let equal = datagram.replace("ratio = \"2:1\"\n", "");
    let t = ClientConfig::parse(&equal, [])
        .unwrap()
        .tunnel_config()
        .unwrap();
    assert_eq!(t.per_packet.sender.weights, Weights::Fixed(vec![1, 1]));
    let auto = datagram.replace("\"2:1\"", "\"auto\"");
    let t = ClientConfig::parse(&auto, [])
        .unwrap()
        .tunnel_config()
        .unwrap();
    assert_eq!(t.per_packet.sender.weights, Weights::Measured);

    // A class rule: UDP port 5004 per packet, the rest on the stream.
    let classes = format!(
        "{}\n[[class]]\ntransport = \"datagram\"\nprotocol = \"udp\"\nport = 5004\n[[class]]\ntransport = \"datagram\"\ndscp = \"ef\"\nport = \"16384-32767\"\n",
        client_toml()
    );
    let t = ClientConfig::parse(&classes, [])
        .unwrap()
        .tunnel_config()
        .unwrap();
    assert_eq!(t.classes.default, Carrier::Stream);
    assert_eq!(t.classes.rules.len(), 2);
    assert_eq!(t.classes.rules[0].protocol, Some(17));
    assert_eq!(t.classes.rules[0].ports, Some(5004..=5004));
    assert_eq!(t.classes.rules[1].dscp, Some(46));
    // … and from the environment.
    let env = [("BRAID_TUNNEL_CLASS_0_PORT", "5006")].map(|(k, v)| (k.to_string(), v.to_string()));
    let t = ClientConfig::parse(&classes, env)
        .unwrap()
        .tunnel_config()
        .unwrap();
    assert_eq!(t.classes.rules[0].ports, Some(5006..=5006));
}

#[test]
fn datagram_and_class_errors_are_one_line_and_name_the_key() {
    let with = |top: &str, tail: &str| {
        let text = format!(
            "{}\n{tail}",
            client_toml().replace("[tun]", &format!("{top}\n[tun]"))
        );
        ClientConfig::parse(&text, []).unwrap_err().0
    };
    let cases = [
        (with("transport = \"carrier-pigeon\"", ""), "transport"),
        (
            with("[datagram]\nratio = \"2:0\"", ""),
            "datagram.ratio: a weight of 0",
        ),
        (
            with("[datagram]\nratio = \"2:1:1\"", ""),
            "datagram.ratio: `2:1:1` has 3 weights for 2 links",
        ),
        (
            with("[datagram]\nratio = \"fast\"", ""),
            "datagram.ratio: `fast` is not a ratio",
        ),
        (
            with("[datagram]\nstall_ms = 0", ""),
            "datagram.stall_ms: must be at least 1",
        ),
        (
            with("[datagram]\nofo_timeout_us = 99999999", ""),
            "datagram.ofo_timeout_us:",
        ),
        (
            with("", "[[class]]\ntransport = \"datagram\"\nport = \"50x\""),
            "class[0].port: `50x`",
        ),
        (
            with(
                "",
                "[[class]]\ntransport = \"datagram\"\nprotocol = \"udpp\"",
            ),
            "class[0].protocol: `udpp`",
        ),
        (
            with("", "[[class]]\ntransport = \"datagram\"\ndscp = 64"),
            "class[0].dscp: `64`",
        ),
        (
            with("", "[[class]]\ntransport = \"datagram\""),
            "class[0]: give at least one of",
        ),
        (
            with("", "[[class]]\ntransport = \"mptcp\"\nport = 1"),
            "class[0].transport: mptcp",
        ),
        (
            with("", "[[class]]\ntransport = \"datagram\"\nprot = 1"),
            "class",
        ),
        (
            with(
                "transport = \"mptcp\"",
                "[[class]]\ntransport = \"datagram\"\nport = 1",
            ),
            "class: per-flow classes need",
        ),
    ];
    for (e, want) in &cases {
        assert!(e.contains(want), "{e} (wanted {want})");
        assert!(!e.contains('\n'), "{e}");
    }
    // An MTU over what one datagram carries, with every packet per packet.
    let big = client_toml().replace("[tun]", "transport = \"datagram\"\n[tun]\nmtu = 1500");
    let e = ClientConfig::parse(&big, []).unwrap_err().0;
    assert!(
        e.starts_with("tun.mtu: 1500 is more than one datagram carries"),
        "{e}"
    );
    assert!(e.contains("1422"), "{e}");
    // Unknown transport on a gateway too.
    let gw = format!(
        "private_key = \"{KEY_B}\"\nlisten = [\"0.0.0.0:7000\"]\ntransport = \"udp\"\n[tun]\naddress = \"10.200.0.1/24\"\n"
    );
    let e = GatewayConfig::parse(&gw, []).unwrap_err().0;
    assert!(e.contains("transport") && e.contains("udp"), "{e}");
}

/// The shipped examples load (with a key in place of the key file), with their commented
/// alternatives too.
#[test]
fn the_dist_examples_load() {
    let dist = |f: &str| {
        let path = format!("{}/../../dist/{f}", env!("CARGO_MANIFEST_DIR"));
        let text = std::fs::read_to_string(&path).unwrap();
        let key = text
            .lines()
            .find(|l| l.starts_with("private_key_file"))
            .unwrap()
            .to_string();
        text.replace(&key, &format!("private_key = \"{KEY_A}\""))
            .replace("REPLACE-WITH-THE-GATEWAY-PUBLIC-KEY=", KEY_B)
            .replace("REPLACE-WITH-THE-CLIENT-PUBLIC-KEY=", KEY_B)
    };
    let client = dist("tunnel-client.toml");
    ClientConfig::parse(&client, []).unwrap();
    let datagram = client.replacen("# transport = \"datagram\"", "transport = \"datagram\"", 1);
    let t = ClientConfig::parse(&datagram, [])
        .unwrap()
        .tunnel_config()
        .unwrap();
    assert_eq!(t.classes.default, Carrier::PerPacket);
    let classes = client
        .replace("# [[class]]", "[[class]]")
        .replace(
            "# transport = \"datagram\"   #",
            "transport = \"datagram\"   #",
        )
        .replace("# protocol", "protocol")
        .replace("# port", "port")
        .replace("# dscp", "dscp");
    let t = ClientConfig::parse(&classes, [])
        .unwrap()
        .tunnel_config()
        .unwrap();
    assert_eq!(t.classes.rules.len(), 1);
    let gateway = GatewayConfig::parse(&dist("tunnel-gateway.toml"), []).unwrap();
    // The examples spell out the default reinjection policy.
    let shipped = ConnectionConfig::default().reinjection;
    assert_eq!(
        ClientConfig::parse(&client, [])
            .unwrap()
            .connection
            .reinjection,
        shipped
    );
    assert_eq!(gateway.connection.reinjection, shipped);
}

/// With no `reinjection` key the connection uses guarded REJ with K = 1.
#[test]
fn the_default_reinjection_is_guarded_rej() {
    let c = ClientConfig::parse(&client_toml(), []).unwrap();
    assert_eq!(c.connection.reinjection, "rejg1");
    let core = core_config(&c.connection, 1472).unwrap();
    assert_eq!(core.reinjection.name(), "rejg1");
}

#[test]
fn queue_management_is_off_by_default_acks_go_per_packet_and_errors_name_the_key() {
    let c = ClientConfig::parse(&client_toml(), []).unwrap();
    let t = c.tunnel_config().unwrap();
    assert!(!t.aqm.enabled());
    assert!(t.classes.acks_per_packet);
    let with = |keys: &str| {
        let text = format!("{}\n[connection]\n{keys}\n", client_toml());
        ClientConfig::parse(&text, []).and_then(|c| c.tunnel_config())
    };
    let on = with("queue_target_ms = 5").unwrap();
    assert_eq!(on.aqm, crate::aqm::AqmConfig::default());
    assert!(on.aqm.enabled());
    assert!(
        !with("acks_per_packet = false")
            .unwrap()
            .classes
            .acks_per_packet
    );
    for (keys, want) in [
        (
            "queue_target_ms = -1",
            "connection.queue_target_ms: -1 out of range",
        ),
        (
            "queue_target_ms = nan",
            "connection.queue_target_ms: NaN out of range",
        ),
        (
            "queue_target_ms = 5\nqueue_interval_ms = 0",
            "connection.queue_interval_ms: 0 out of range",
        ),
        (
            "queue_target_ms = 200\nqueue_interval_ms = 100",
            "connection.queue_target_ms: 200 must be less than queue_interval_ms (100)",
        ),
    ] {
        let e = with(keys).unwrap_err().0;
        assert!(e.contains(want), "{e} (wanted {want})");
        assert!(!e.contains('\n'), "{e}");
    }
}

/// Values that parse but could not run (found by mutating the shipped configurations): a
/// timer so long that its deadline overflows the clock, a floor of infinite milliseconds, an
/// interface name Linux would refuse, a buffer that would take the machine's memory. Each is
/// a one-line error naming the key.
#[test]
fn values_that_cannot_run_are_refused_with_the_key() {
    let client = |top: &str, connection: &str| {
        let text = client_toml()
            .replace("[tun]", &format!("{top}\n[tun]"))
            .replace(
                "[[link]]\nname = \"eth0\"",
                &format!("[connection]\n{connection}\n[[link]]\nname = \"eth0\""),
            );
        ClientConfig::parse(&text, []).map(|_| ())
    };
    for (top, connection, want) in [
        (
            "keepalive_ms = 9223372036854775807",
            "",
            "keepalive_ms: 9223372036854775807 out of range",
        ),
        (
            "dead_after_ms = 1099511627776",
            "",
            "dead_after_ms: 1099511627776 out of range",
        ),
        (
            "",
            "rej_min_rttvar_ms = inf",
            "connection.rej_min_rttvar_ms: inf out of range",
        ),
        (
            "",
            "rej_min_rttvar_ms = -1",
            "connection.rej_min_rttvar_ms: -1 out of range",
        ),
        (
            "",
            "send_buffer = 109951162777600",
            "connection.send_buffer 109951162777600 bytes out of range",
        ),
        (
            "",
            "receive_buffer = 109951162777600",
            "connection.receive_buffer 109951162777600 bytes out of range",
        ),
        (
            "[batch]\nsegments = 1000000000000\ncapacity = 2000000000000000",
            "",
            "batch.segments: 1000000000000 out of range",
        ),
        (
            "[batch]\ncapacity = 2000000000000000",
            "",
            "batch.capacity: 2000000000000000 bytes out of range",
        ),
        (
            "",
            "initial_window = 100000000000000000",
            "connection.initial_window 100000000000000000 out of range",
        ),
        (
            "[batch]\ntimeout_us = 9223372036854775807",
            "",
            "batch.timeout_us: 9223372036854775807 out of range",
        ),
    ] {
        let e = client(top, connection).unwrap_err().0;
        assert!(e.contains(want), "{e} (wanted {want})");
        assert!(!e.contains('\n'), "{e}");
    }
    for (name, key) in [("", "link[0].name"), ("an-interface-name", "link[0].name")] {
        let text = client_toml().replace("name = \"eth0\"", &format!("name = \"{name}\""));
        let e = ClientConfig::parse(&text, []).unwrap_err().0;
        assert!(
            e.starts_with(&format!("{key}: `{name}` is not an interface name")),
            "{e}"
        );
    }
    let text = client_toml().replace("[tun]", "[tun]\nname = \"a/b\"");
    let e = ClientConfig::parse(&text, []).unwrap_err().0;
    assert!(
        e.starts_with("tun.name: `a/b` is not an interface name"),
        "{e}"
    );
    let gateway = format!(
        "private_key = \"{KEY_B}\"\nlisten = [\"0.0.0.0:7000\"]\nclient_timeout_ms = 9223372036854775807\n[tun]\naddress = \"10.200.0.1/24\"\n"
    );
    let e = GatewayConfig::parse(&gateway, []).unwrap_err().0;
    assert!(
        e.starts_with("client_timeout_ms: 9223372036854775807 out of range"),
        "{e}"
    );
}

/// `[pm.hmm]` turns seed 004's prediction on and `[pm.capacity]` sets the capacity estimate
/// (braid pm's `[hmm]` and `[capacity]` keys); a wrong key or value is a one-line error.
#[test]
fn the_path_managers_hmm_and_capacity_estimate_are_set_in_pm() {
    let c = ClientConfig::parse(&client_toml(), []).unwrap();
    let pm = c.pm_config().unwrap();
    assert_eq!(pm.hmm, None);
    assert_eq!(pm.capacity, braid_pm::CapacityConfig::default());
    let text = client_toml().replace(
        "[tun]",
        "[pm]\nmode = \"cross-cap\"\n\
         [pm.hmm]\ninterval_ms = 2000\nwindow = 8\n\
         [pm.capacity]\nsample_ms = 100\ndemand_window_ms = 20000\nhorizon_ms = 60000\n\
         headroom = 1.2\nmain_share = 0.9\nfloor_db = 1.5\n[tun]",
    ) + "threshold_dbm = -80.0\n";
    let pm = ClientConfig::parse(&text, []).unwrap().pm_config().unwrap();
    assert_eq!(
        pm.hmm,
        Some(braid_pm::HmmConfig {
            interval: Duration::from_secs(2),
            window: 8,
            ..braid_pm::HmmConfig::default()
        })
    );
    assert_eq!(
        pm.capacity,
        braid_pm::CapacityConfig {
            sample: Duration::from_millis(100),
            demand_window: Duration::from_secs(20),
            horizon: Duration::from_secs(60),
            headroom: 1.2,
            main_share: 0.9,
            floor_db: 1.5,
        }
    );
    for (from, to, want) in [
        ("window = 8", "windw = 8", "windw"),
        (
            "window = 8",
            "window = 0",
            "pm: hmm window must be within 1..=64",
        ),
        (
            "main_share = 0.9",
            "main_share = 0.3",
            "pm: capacity main_share must be within (0.5, 1]",
        ),
    ] {
        let e = ClientConfig::parse(&text.replace(from, to), [])
            .unwrap_err()
            .0;
        assert!(e.contains(want), "{from} → {to}: {e}");
        assert!(!e.contains('\n'), "{e}");
    }
}
