//! Network namespaces for tests: create one, run code inside it, delete it on drop
//! (also when the test panics). Uses the `ip` command (iproute2) and needs root.

use std::fs::File;
use std::io;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};

use nix::sched::{CloneFlags, setns};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// A named network namespace (`/run/netns/NAME`), deleted when dropped together
/// with the processes left in it.
#[derive(Debug)]
pub struct NetNs {
    /// The name given to `ip netns`.
    pub name: String,
}

impl NetNs {
    /// Creates a namespace named `prefix`, the process id and a counter (unique in
    /// this process, and across processes running at the same time), with its
    /// loopback up.
    pub fn new(prefix: &str) -> io::Result<NetNs> {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let name = format!("{prefix}{}-{n}", std::process::id());
        ip(&["netns", "add", &name])?;
        // From here on, Drop removes it whatever fails.
        let ns = NetNs { name };
        ip(&["-n", &ns.name, "link", "set", "lo", "up"])?;
        Ok(ns)
    }

    /// Runs `ip netns exec NAME args…`; an error, with the command's stderr, if it
    /// cannot start or exits with a failure.
    pub fn exec(&self, args: &[&str]) -> io::Result<Output> {
        let mut all = vec!["netns", "exec", self.name.as_str()];
        all.extend_from_slice(args);
        ip(&all)
    }

    /// Runs `ip netns exec NAME args…` and returns its output whatever its exit
    /// status (an error only if it cannot start): for commands expected to fail.
    pub fn output(&self, args: &[&str]) -> io::Result<Output> {
        Command::new("ip")
            .args(["netns", "exec", self.name.as_str()])
            .args(args)
            .output()
    }

    /// Runs `f` on a new thread that has entered the namespace (`setns(2)`), and
    /// returns its result. Sockets that `f` opens belong to the namespace and stay
    /// usable from any thread afterwards.
    ///
    /// # Panics
    /// If the namespace cannot be entered, and with `f`'s panic if `f` panics.
    pub fn run<T: Send + 'static>(&self, f: impl FnOnce() -> T + Send + 'static) -> T {
        let path = format!("/run/netns/{}", self.name);
        let thread = std::thread::Builder::new()
            .name(format!("netns {}", self.name))
            .spawn(move || {
                let file = File::open(&path).unwrap_or_else(|e| panic!("open {path}: {e}"));
                setns(&file, CloneFlags::CLONE_NEWNET)
                    .unwrap_or_else(|e| panic!("setns {path}: {e}"));
                f()
            })
            .expect("spawn a thread");
        match thread.join() {
            Ok(t) => t,
            Err(panic) => std::panic::resume_unwind(panic),
        }
    }

    /// Runs `ip -n NAME args…` (configuration inside the namespace).
    pub fn ip(&self, args: &[&str]) -> io::Result<Output> {
        let mut all = vec!["-n", self.name.as_str()];
        all.extend_from_slice(args);
        ip(&all)
    }

    /// Applies changes to the namespace's `filter` table in one transaction
    /// (`iptables-restore --noflush`), each change as `iptables` takes it (`"-I FORWARD -i r1 -j
    /// DROP"`): rules that drop a link both ways are in force both ways from the same instant,
    /// where one `iptables` command per rule leaves it half dropped for milliseconds.
    pub fn iptables(&self, changes: &[&str]) -> io::Result<Output> {
        let script = format!("*filter\n{}\nCOMMIT\n", changes.join("\n"));
        let out = self.output(&[
            "sh",
            "-c",
            "printf '%s' \"$1\" | iptables-restore --noflush",
            "sh",
            &script,
        ])?;
        if !out.status.success() {
            return Err(io::Error::other(format!(
                "iptables-restore in {} ({}): {} {}",
                self.name,
                changes.join("; "),
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        Ok(out)
    }

    /// Waits until something in the namespace listens on TCP `port` (a server just spawned
    /// there), polling `ss` every 50 ms; an error after `within`. A fixed pause was not always
    /// enough: on a loaded machine a client started before its server listened and found
    /// nothing.
    pub fn wait_listening(&self, port: u16, within: std::time::Duration) -> io::Result<()> {
        let filter = format!("sport = :{port}");
        let t0 = std::time::Instant::now();
        loop {
            if !self.exec(&["ss", "-Hltn", &filter])?.stdout.is_empty() {
                return Ok(());
            }
            if t0.elapsed() >= within {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "nothing listens on port {port} in {} after {within:?}",
                        self.name
                    ),
                ));
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }

    /// The index of interface `ifname` in the namespace.
    pub fn ifindex(&self, ifname: &str) -> io::Result<u32> {
        let out = self.exec(&["cat", &format!("/sys/class/net/{ifname}/ifindex")])?;
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .map_err(|e| io::Error::other(format!("ifindex of {ifname}: {e}")))
    }
}

impl Drop for NetNs {
    fn drop(&mut self) {
        // Processes left in the namespace (a server a test started) would keep it
        // alive; our own process is never in it (only threads made by `run`).
        if let Ok(out) = ip(&["netns", "pids", &self.name]) {
            let me = std::process::id();
            for pid in String::from_utf8_lossy(&out.stdout).split_whitespace() {
                match pid.parse::<i32>() {
                    Ok(p) if u32::try_from(p).ok() != Some(me) => {
                        let _ = kill(Pid::from_raw(p), Signal::SIGKILL);
                    }
                    _ => {}
                }
            }
        }
        if let Err(e) = ip(&["netns", "del", &self.name]) {
            eprintln!("deleting network namespace {}: {e}", self.name);
        }
    }
}

/// Creates a veth pair, `a_if` in `a` and `b_if` in `b`, gives each end its
/// address (CIDR, IPv4 or IPv6; IPv6 without duplicate address detection) and
/// brings both up.
pub fn veth(
    a: &NetNs,
    a_if: &str,
    a_addr: &str,
    b: &NetNs,
    b_if: &str,
    b_addr: &str,
) -> io::Result<()> {
    ip(&[
        "link", "add", a_if, "netns", &a.name, "type", "veth", "peer", "name", b_if, "netns",
        &b.name,
    ])?;
    for (ns, ifname, addr) in [(a, a_if, a_addr), (b, b_if, b_addr)] {
        let mut args = vec!["addr", "add", addr, "dev", ifname];
        if addr.contains(':') {
            args.push("nodad");
        }
        ns.ip(&args)?;
        ns.ip(&["link", "set", ifname, "up"])?;
    }
    Ok(())
}

fn ip(args: &[&str]) -> io::Result<Output> {
    let out = Command::new("ip").args(args).output()?;
    if !out.status.success() {
        return Err(io::Error::other(format!(
            "ip {}: {} {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(out)
}
