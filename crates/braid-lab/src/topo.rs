//! Wiring an emulated link between namespaces: `client_if` (client namespace) ⇄ veth ⇄
//! `a_if` (emulator namespace) … emulator … `b_if` ⇄ veth ⇄ `server_if` (server namespace).
//! The client and server ends share one L2 segment through the emulator; the emulator's ends
//! carry no address and no IPv6, so its namespace never sends a frame of its own.

use std::io;
use std::process::Command;

use braid_mptcp::netns::NetNs;

/// One end of an emulated link outside the emulator: a namespace, an interface name and its
/// address (CIDR; IPv6 without duplicate address detection).
#[derive(Debug, Clone, Copy)]
pub struct End<'a> {
    pub ns: &'a NetNs,
    pub ifname: &'a str,
    pub addr: &'a str,
}

/// The emulator's interfaces for link `tag`: (`{tag}a`, `{tag}b`).
pub fn emu_ifnames(tag: &str) -> (String, String) {
    (format!("{tag}a"), format!("{tag}b"))
}

/// Creates the two veth pairs of an emulated link and configures every end for frame-exact
/// forwarding: checksum and segmentation offloads off on all four ends, so every frame the
/// emulator reads is one wire packet with a complete checksum. Returns the emulator's
/// interface names.
pub fn emulated_link(
    client: End,
    emu: &NetNs,
    server: End,
    tag: &str,
) -> io::Result<(String, String)> {
    let (a, b) = emu_ifnames(tag);
    for (end, inner) in [(client, &a), (server, &b)] {
        run(
            "ip",
            &[
                "link",
                "add",
                end.ifname,
                "netns",
                &end.ns.name,
                "type",
                "veth",
                "peer",
                "name",
                inner,
                "netns",
                &emu.name,
            ],
        )?;
        sysctl(emu, &format!("net.ipv6.conf.{inner}.disable_ipv6=1"))?;
        offloads_off(emu, inner)?;
        emu.ip(&["link", "set", inner, "promisc", "on"])?;
        emu.ip(&["link", "set", inner, "up"])?;
        offloads_off(end.ns, end.ifname)?;
        let mut args = vec!["addr", "add", end.addr, "dev", end.ifname];
        if end.addr.contains(':') {
            args.push("nodad");
        }
        end.ns.ip(&args)?;
        end.ns.ip(&["link", "set", end.ifname, "up"])?;
    }
    Ok((a, b))
}

fn offloads_off(ns: &NetNs, ifname: &str) -> io::Result<()> {
    ns.exec(&[
        "ethtool", "-K", ifname, "tx", "off", "tso", "off", "gso", "off", "gro", "off",
    ])
    .map(|_| ())
    .map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("ethtool (Debian `ethtool`) on {ifname}: {e}"),
        )
    })
}

fn sysctl(ns: &NetNs, kv: &str) -> io::Result<()> {
    ns.exec(&["sysctl", "-qw", kv]).map(|_| ())
}

pub(crate) fn run(cmd: &str, args: &[&str]) -> io::Result<()> {
    let out = Command::new(cmd).args(args).output()?;
    if out.status.success() {
        Ok(())
    } else {
        Err(io::Error::other(format!(
            "{cmd} {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}
