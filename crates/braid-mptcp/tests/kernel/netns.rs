//! The namespace test support itself: isolation, errors, and cleanup on panic.

use std::os::unix::process::ExitStatusExt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;
use std::process::{Child, Command};

use braid_mptcp::netns::{NetNs, veth};

#[test]
fn dropped_on_panic_with_its_processes() {
    let mut child: Option<Child> = None;
    let mut name = String::new();
    let r = catch_unwind(AssertUnwindSafe(|| {
        let ns = NetNs::new("bmp").unwrap();
        name = ns.name.clone();
        // A process left running in the namespace, as a crashed test would leave.
        let c = Command::new("ip")
            .args(["netns", "exec", &ns.name, "sleep", "30"])
            .spawn()
            .unwrap();
        child = Some(c);
        // Wait until it runs inside the namespace.
        for _ in 0..100 {
            let pids = Command::new("ip")
                .args(["netns", "pids", &ns.name])
                .output()
                .unwrap();
            if !pids.stdout.is_empty() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        panic!("test failure inside a namespace");
    }));
    assert!(r.is_err());
    assert!(
        !Path::new("/run/netns").join(&name).exists(),
        "{name} left behind"
    );
    let status = child.unwrap().wait().unwrap();
    assert_eq!(status.signal(), Some(9), "{status:?}");
}

#[test]
fn run_exec_and_errors() {
    let a = NetNs::new("bmn").unwrap();
    let b = NetNs::new("bmn").unwrap();
    assert_ne!(a.name, b.name);
    veth(&a, "x0", "10.7.0.1/24", &b, "x1", "10.7.0.2/24").unwrap();
    // Each side sees only its own end; the peer answers across the pair.
    assert!(a.ifindex("x0").is_ok() && a.ifindex("x1").is_err());
    let listener = b.run(|| std::net::TcpListener::bind("10.7.0.2:7000").unwrap());
    a.run(|| {
        let to = "10.7.0.2:7000".parse().unwrap();
        std::net::TcpStream::connect_timeout(&to, std::time::Duration::from_secs(2)).unwrap()
    });
    listener.accept().unwrap();
    // run() executes in the namespace: x0 exists there, not in ours.
    let seen = a.run(|| {
        Path::new("/proc/thread-self/net/dev").exists()
            && std::fs::read_to_string("/proc/thread-self/net/dev")
                .unwrap()
                .contains("x0:")
    });
    assert!(seen);
    assert!(
        !std::fs::read_to_string("/proc/thread-self/net/dev")
            .unwrap()
            .contains("x0:")
    );
    // A failing command is an error naming it, with its stderr; output() returns it.
    let e = a
        .exec(&["ip", "link", "show", "nosuchdev"])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("nosuchdev") && e.contains("does not exist"),
        "{e}"
    );
    let out = a.output(&["ip", "link", "show", "nosuchdev"]).unwrap();
    assert!(!out.status.success());
    // A panic inside run() reaches the caller.
    let r = catch_unwind(AssertUnwindSafe(|| a.run(|| panic!("inside"))));
    assert!(r.is_err());
}
