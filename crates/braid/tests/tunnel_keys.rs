//! Keys as a user makes them: `braid keygen > FILE` in a shell, each daemon started from its
//! `private_key_file`, the peer's public key copied from the other file. The tunnel (braid
//! transport, the default) then carries a datagram both ways.
//!
//! client (c1, c2) — router — server 10.0.9.2, which runs the gateway (TUN 10.200.0.1) and a
//! UDP echo on its TUN address; the client's TUN is 10.200.0.2.

mod netns;

use std::net::UdpSocket;
use std::path::Path;
use std::time::Duration;

use netns::*;

/// `braid keygen > path`, run by a shell with the usual umask, as the README shows.
fn keygen_to(path: &Path) -> String {
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "umask 022; '{}' keygen > '{}'",
            env!("CARGO_BIN_EXE_braid"),
            path.display()
        ))
        .output()
        .expect("sh");
    assert!(out.status.success(), "braid keygen: {out:?}");
    let warning = String::from_utf8_lossy(&out.stderr);
    assert!(
        warning.contains("can be read by others"),
        "no warning for a world-readable key file: {warning:?}"
    );
    let text = std::fs::read_to_string(path).unwrap();
    // The public key, as a user copies it from the file.
    text.lines()
        .find_map(|l| l.strip_prefix("public_key = \""))
        .and_then(|l| l.strip_suffix('"'))
        .unwrap_or_else(|| panic!("no public_key line in {text:?}"))
        .to_string()
}

#[test]
fn daemons_start_from_the_files_braid_keygen_writes() {
    if !require_root() {
        return;
    }
    let t = Topo::new("btk", [50, 30], true);
    let dir = std::env::temp_dir().join(format!("braid-tunnel-keys-{}", t.client.name));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let _dir = Dir(dir.clone());
    let (gw_key, cl_key) = (dir.join("gateway.key"), dir.join("client.key"));
    let gw_pub = keygen_to(&gw_key);
    let cl_pub = keygen_to(&cl_key);
    let _gw = Tunnel::start(
        &t.server,
        "gateway",
        &dir,
        &format!(
            r#"
private_key_file = "{}"
listen = ["{SERVER}:7000"]
[tun]
name = "braid0"
address = "10.200.0.1/24"
[ops]
control = "{}"
[[client]]
name = "a"
public_key = "{cl_pub}"
allowed_ips = ["10.200.0.2/32"]
"#,
            gw_key.display(),
            dir.join("gateway.sock").display()
        ),
    );
    let cl = Tunnel::start(
        &t.client,
        "client",
        &dir,
        &format!(
            r#"
private_key_file = "{}"
gateway_public_key = "{gw_pub}"
gateway = "{SERVER}:7000"
[tun]
name = "braid0"
address = "10.200.0.2/24"
[ops]
control = "{}"
[[link]]
name = "c1"
[[link]]
name = "c2"
"#,
            cl_key.display(),
            dir.join("client.sock").display()
        ),
    );
    let v = cl.wait(
        "a connection with two paths",
        Duration::from_secs(10),
        |v| v["connections"][0]["established"] == true && v["connections"][0]["usable_paths"] == 2,
    );
    assert_eq!(v["secure"]["auth_failed"], 0, "{v}");

    // A datagram through the tunnel and back.
    let echo = t
        .server
        .run(|| UdpSocket::bind("10.200.0.1:9000").expect("bind the TUN address"));
    echo.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let echoer = std::thread::spawn(move || {
        let mut buf = [0u8; 64];
        let (n, from) = echo
            .recv_from(&mut buf)
            .expect("a datagram through the tunnel");
        echo.send_to(&buf[..n], from).unwrap();
        buf[..n].to_vec()
    });
    let probe = t.client.run(|| UdpSocket::bind("10.200.0.2:0").unwrap());
    probe
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    probe.send_to(b"keys work", "10.200.0.1:9000").unwrap();
    let mut buf = [0u8; 64];
    let n = probe.recv(&mut buf).expect("the echo through the tunnel");
    assert_eq!(&buf[..n], b"keys work");
    assert_eq!(echoer.join().unwrap(), b"keys work");
}

/// Whatever the environment holds, a daemon's configuration error is one line and exit code
/// 2: a variable that is not Unicode (any name: `std::env::vars` panicked on it), one of ours
/// whose value is not, and an override naming a huge array index (it allocated until the
/// process aborted). No root needed: the daemon stops at its configuration.
#[test]
fn configuration_errors_are_one_line_whatever_the_environment() {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    let dir = std::env::temp_dir().join(format!("braid-env-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("bad.toml");
    std::fs::write(&file, "bogus = 1\n").unwrap();
    let not_unicode = OsStr::from_bytes(b"\xff");
    let cases: [(&str, &OsStr, &str); 3] = [
        ("BRAID_TEST_UNRELATED", not_unicode, "key `bogus`"),
        (
            "BRAID_TUNNEL_TUN_NAME",
            not_unicode,
            "BRAID_TUNNEL_TUN_NAME: the value is not valid UTF-8",
        ),
        (
            "BRAID_TUNNEL_LINK_99999999999_NAME",
            OsStr::new("x"),
            "BRAID_TUNNEL_LINK_99999999999_NAME: index 99999999999 out of range",
        ),
    ];
    for (role, (var, value, want)) in ["client", "gateway"]
        .iter()
        .flat_map(|r| cases.iter().map(move |c| (r, c)))
    {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_braid"))
            .args(["tunnel", role, "--config"])
            .arg(&file)
            .env(var, value)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{role} {var}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{role} {var}: {err}");
        assert!(err.contains(want), "{role} {var}: {err}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
