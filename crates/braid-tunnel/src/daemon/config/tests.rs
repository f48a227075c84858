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
    assert_eq!(c.connection.scheduler, "minrtt");
    assert_eq!(c.link_gateway(1), "192.0.2.1:7000".parse().unwrap());
    // A backup link makes `auto` the backup mode.
    assert_eq!(c.pm_config().unwrap().mode, braid_pm::Mode::Backup);
    // The core datagram leaves room for UDP/IPv4, the secure header and tag, the id.
    let core = c.core_config(1472).unwrap();
    assert_eq!(core.max_datagram_size, 1472 - 29 - 4);
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
