//! `braid sim --pcap` read back through `dist/braid.lua` by tshark (Debian's `tshark`,
//! installed by scripts/deps): every link direction's capture decodes, its DATA frames are as
//! many as the simulator's count of data packets the direction carried, and truncated or
//! garbage input is marked malformed by the dissector, never a Lua error.

use std::path::{Path, PathBuf};
use std::process::Command;

use pcap_file::pcap::{PcapPacket, PcapReader, PcapWriter};
use serde_json::Value;

fn braid() -> Command {
    Command::new(env!("CARGO_BIN_EXE_braid"))
}

fn repo(path: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(path)
}

/// Whether tshark can run; says so when it cannot, and fails under `CI=true`.
fn tshark_present() -> bool {
    let ok = Command::new("tshark")
        .arg("-v")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "tshark is not installed (scripts/deps installs it): the capture tests must run in CI"
        );
        eprintln!("SKIPPED: tshark is not installed (run scripts/deps as root to install it)");
    }
    ok
}

/// A fresh directory, removed when dropped (also when the test fails).
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!("braid-pcap-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Shortened E3 (one variant, 4 s, the preferred path's address lost at 2 s and back at 3 s):
/// the JSON printed, with `--pcap dir` when given.
fn e3(pcap: Option<&Path>) -> String {
    let mut cmd = braid();
    cmd.arg("sim")
        .arg(repo("scenarios/e3-rtt-below-rtomin.toml"))
        .args(["--json", "--quiet", "--reps", "1", "--jobs", "1"])
        .args(["--set", "duration=4s"])
        .args(["--set", "connection.reinjection=rej1"])
        .args(["--set", "schedule.0.first=2s"])
        .args(["--set", "schedule.0.down=1s"])
        .args(["--set", "schedule.0.count=1"]);
    if let Some(dir) = pcap {
        cmd.arg("--pcap").arg(dir);
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// tshark with the dissector on `file`, `-T fields` with `fields` (every occurrence, joined by
/// ','): one line per packet, and everything tshark printed on stderr.
fn tshark(file: &Path, filter: Option<&str>, fields: &[&str]) -> (Vec<Vec<String>>, String) {
    let mut cmd = Command::new("tshark");
    cmd.arg("-X")
        .arg(format!("lua_script:{}", repo("dist/braid.lua").display()))
        .arg("-r")
        .arg(file)
        .args(["-T", "fields", "-E", "occurrence=a", "-E", "aggregator=,"]);
    if let Some(f) = filter {
        cmd.args(["-Y", f]);
    }
    for f in fields {
        cmd.args(["-e", f]);
    }
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        !stdout.contains("Lua Error") && !stderr.contains("Lua Error"),
        "the dissector raised on {}: {stderr}{stdout}",
        file.display()
    );
    let rows = stdout
        .lines()
        .map(|l| l.split('\t').map(str::to_string).collect())
        .collect();
    (rows, stderr)
}

/// Occurrences of a field in a column (values joined by ',').
fn occurrences(rows: &[Vec<String>], col: usize) -> usize {
    rows.iter()
        .map(|r| {
            r.get(col)
                .map_or(0, |v| v.split(',').filter(|s| !s.is_empty()).count())
        })
        .sum()
}

#[test]
fn e3_capture_data_frames_match_the_simulator_count() {
    if !tshark_present() {
        return;
    }
    let dir = TempDir::new("e3");
    let with = e3(Some(&dir.0));
    // Capturing changes nothing in the run.
    assert_eq!(with, e3(None), "--pcap changed the results");

    let index: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.0.join("captures.json")).unwrap())
            .unwrap();
    let files = index["files"].as_array().unwrap();
    // Two links, two directions each, one run.
    assert_eq!(files.len(), 4, "{index:#}");
    let (mut total_data, mut path_opens, mut add_addrs) = (0, 0, 0);
    for f in files {
        let name = f["file"].as_str().unwrap();
        assert!(
            name.starts_with("rej1.rep0.") && name.ends_with(".pcap"),
            "{name}"
        );
        let (rows, _) = tshark(
            &dir.0.join(name),
            None,
            &[
                "ip.src",
                "ip.dst",
                "braid.seq",
                "braid.data.dsn",
                "braid.ack.cum",
                "braid.path_open.local",
                "braid.addr.id",
                "braid.malformed",
            ],
        );
        let get = |k: &str| f[k].as_u64().unwrap();
        let data = occurrences(&rows, 3) as u64;
        println!(
            "{name}: {} packets decoded (simulator: {} sent, {} written); DATA frames {data} (simulator: {} data packets sent); ACK frames {}",
            occurrences(&rows, 2),
            get("sent"),
            get("packets"),
            get("data_sent"),
            occurrences(&rows, 4),
        );
        // Every record is a braid packet, as many as the direction accepted.
        assert_eq!(occurrences(&rows, 2) as u64, get("packets"), "{name}");
        assert_eq!(get("packets"), get("sent"), "{name}");
        assert_eq!(data, get("data_sent"), "{name}: DATA frames");
        assert_eq!(occurrences(&rows, 7), 0, "{name}: malformed packets");
        // The endpoints' addresses of the two-node form: the client's on link i is 10.0.i.2,
        // and every path goes to the server's first address, 10.0.0.1 (as MPTCP subflows join
        // the server's address), whichever link carries it.
        let i = if f["link"] == "wlan" { 0 } else { 1 };
        let (server, client) = ("10.0.0.1".to_string(), format!("10.0.{i}.2"));
        let down = f["from"].as_str().unwrap().starts_with("server.");
        let (src, dst) = if down {
            (&server, &client)
        } else {
            (&client, &server)
        };
        let other = rows.iter().find(|r| &r[0] != src || &r[1] != dst);
        assert!(other.is_none(), "{name}: {other:?}, not {src} → {dst}");
        if down {
            total_data += data;
        } else {
            // The client acknowledges what it receives.
            assert!(occurrences(&rows, 4) > 0, "{name}: no ACK frames");
        }
        path_opens += occurrences(&rows, 5);
        add_addrs += occurrences(&rows, 6);
    }
    // CBR 1800 packets/s for 3 s, from the server.
    assert!(
        total_data > 3000,
        "only {total_data} DATA frames downstream"
    );
    // The first path, and the preferred path again after its address came back.
    assert!(path_opens >= 2, "{path_opens} PATH_OPEN frames");
    assert!(add_addrs >= 1, "{add_addrs} address frames");
}

#[test]
fn dissector_marks_truncated_and_garbage_input() {
    if !tshark_present() {
        return;
    }
    let dir = TempDir::new("cut");
    e3(Some(&dir.0));
    let source = dir.0.join("rej1.rep0.wlan.server-client.pcap");
    let (rows, _) = tshark(&source, None, &["braid.data.len"]);
    let has_data: Vec<bool> = rows
        .iter()
        .map(|r| {
            r[0].split(',')
                .any(|l| l.parse::<u64>().is_ok_and(|n| n > 0))
        })
        .collect();
    assert!(has_data.iter().filter(|&&d| d).count() > 100);

    // Snap-length truncation: a packet with data loses its last payload byte (DATA is the
    // last frame), any other its header's tail; then garbage datagrams.
    let mut reader = PcapReader::new(std::fs::File::open(&source).unwrap()).unwrap();
    let header = reader.header();
    let cut = dir.0.join("cut.pcap");
    let mut writer = PcapWriter::with_header(std::fs::File::create(&cut).unwrap(), header).unwrap();
    let mut n = 0usize;
    let mut last = None;
    while let Some(p) = reader.next_packet() {
        let p = p.unwrap();
        let keep = if has_data[n] {
            p.data.len() - 1
        } else {
            28 + 1 + n % 6
        };
        writer
            .write_packet(&PcapPacket::new(p.timestamp, p.orig_len, &p.data[..keep]))
            .unwrap();
        last = Some((p.timestamp, p.data[..28].to_vec()));
        n += 1;
    }
    let (ts, ip_udp) = last.unwrap();
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let garbage = 50;
    for i in 0..garbage {
        let mut frame = ip_udp.clone();
        for _ in 0..(1 + i * 7 % 90) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            frame.push(x as u8);
        }
        // A garbage datagram that parses is possible in principle; make the first byte an
        // unsupported version so that each one is malformed.
        frame[28] = 0x70 | (frame[28] & 0x0f);
        writer
            .write_packet(&PcapPacket::new(ts, frame.len() as u32, &frame))
            .unwrap();
    }
    drop(writer);
    let (rows, _) = tshark(&cut, None, &["frame.number", "braid.malformed"]);
    assert_eq!(rows.len(), n + garbage, "every record read");
    let malformed = rows.iter().filter(|r| !r[1].is_empty()).count();
    println!(
        "{malformed} of {} truncated or garbage packets marked malformed",
        n + garbage
    );
    assert_eq!(malformed, n + garbage);

    // A file cut in the middle of a record: what precedes decodes, no Lua error.
    let bytes = std::fs::read(&source).unwrap();
    let short = dir.0.join("short.pcap");
    std::fs::write(&short, &bytes[..bytes.len() / 2 + 3]).unwrap();
    let (rows, stderr) = tshark(&short, None, &["braid.seq"]);
    assert!(rows.len() > 100, "{stderr}");
}
